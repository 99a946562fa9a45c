import knex, { type Knex } from "knex";
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
let orm: Knex;
beforeAll(() => {
  orm = knex({ client: "pg", connection: db.url, pool: { min: 0, max: 2 } });
});
afterAll(() => orm.destroy());

describe("enqueue with Knex", () => {
  it("the trx of knex.transaction: commit keeps the order and its events", async () => {
    const order = anOrder();
    const written = await orm.transaction(async (trx) => {
      await trx("library_orders").insert({ id: order.id, total: order.total });
      return enqueue(trx, order.events);
    });
    await expectCommitted(db, order, written);
  });

  it("rollback drops both", async () => {
    const order = anOrder();
    await expect(
      orm.transaction(async (trx) => {
        await trx("library_orders").insert({ id: order.id, total: order.total });
        await enqueue(trx, order.events);
        throw new Rollback();
      }),
    ).rejects.toBeInstanceOf(Rollback);
    await expectNothing(db, order.id);
  });

  it("a missing outbox table: says to run `outbox migrate`", async () => {
    await expectNotMigrated(() => orm.transaction((trx) => enqueue(trx, anOrder().events, NOT_MIGRATED)));
  });

  it("refuses the root knex and an ended trx, before writing", async () => {
    const order = anOrder();
    // @ts-expect-error the root knex is not a transaction
    await expectRefused(db, () => enqueue(orm, order.events), /a Knex instance.*knex\.transaction/);
    const trx = await orm.transaction();
    await trx.commit();
    await expectRefused(db, () => enqueue(trx, order.events), /a Knex transaction that has ended/);
    await expectNothing(db, order.id);
  });
});
