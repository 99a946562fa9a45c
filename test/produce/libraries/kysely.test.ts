import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue } from "../../../functions/shared/produce/enqueue.ts";
import {
  anOrder,
  expectCommitted,
  expectNothing,
  expectNotMigrated,
  expectRefused,
  NOT_MIGRATED,
  Rollback,
  useOrdersDatabase,
} from "./orders.ts";

const db = useOrdersDatabase();
interface Database {
  library_orders: { id: string; total: number };
}
let orm: Kysely<Database>;
beforeAll(() => {
  orm = new Kysely<Database>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: db.url, max: 2 }) }),
  });
});
afterAll(() => orm.destroy());

describe("enqueue with Kysely", () => {
  it("the trx of db.transaction().execute: commit keeps the order and its events", async () => {
    const order = anOrder();
    const written = await orm.transaction().execute(async (trx) => {
      await trx.insertInto("library_orders").values({ id: order.id, total: order.total }).execute();
      return enqueue(trx, order.events);
    });
    await expectCommitted(db, order, written);
  });

  it("rollback drops both", async () => {
    const order = anOrder();
    await expect(
      orm.transaction().execute(async (trx) => {
        await trx.insertInto("library_orders").values({ id: order.id, total: order.total }).execute();
        await enqueue(trx, order.events);
        throw new Rollback();
      }),
    ).rejects.toBeInstanceOf(Rollback);
    await expectNothing(db, order.id);
  });

  it("a missing outbox table: says to run `outbox migrate`", async () => {
    await expectNotMigrated(() =>
      orm.transaction().execute((trx) => enqueue(trx, anOrder().events, NOT_MIGRATED)),
    );
  });

  it("refuses the root Kysely, before writing", async () => {
    const order = anOrder();
    await expectRefused(
      db,
      // @ts-expect-error the root Kysely is not a transaction
      () => enqueue(orm, order.events),
      /a Kysely instance.*db\.transaction\(\)\.execute/,
    );
    await expectNothing(db, order.id);
  });
});
