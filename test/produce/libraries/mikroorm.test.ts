import { MikroORM } from "@mikro-orm/postgresql";
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
let orm: MikroORM;
beforeAll(async () => {
  orm = await MikroORM.init({
    clientUrl: db.url,
    entities: [],
    discovery: { warnWhenNoEntities: false },
    pool: { max: 2 },
  });
});
afterAll(() => orm.close(true));

const insert = "insert into library_orders (id, total) values (?, ?)";

describe("enqueue with MikroORM", () => {
  it("the em of em.transactional: commit keeps the order and its events", async () => {
    const order = anOrder();
    const written = await orm.em.fork().transactional(async (em) => {
      await em.execute(insert, [order.id, order.total]);
      return enqueue(em, order.events);
    });
    await expectCommitted(db, order, written);
  });

  it("rollback drops both", async () => {
    const order = anOrder();
    await expect(
      orm.em.fork().transactional(async (em) => {
        await em.execute(insert, [order.id, order.total]);
        await enqueue(em, order.events);
        throw new Rollback();
      }),
    ).rejects.toBeInstanceOf(Rollback);
    await expectNothing(db, order.id);
  });

  it("a missing outbox table: says to run `outbox migrate`", async () => {
    await expectNotMigrated(() =>
      orm.em.fork().transactional((em) => enqueue(em, anOrder().events, NOT_MIGRATED)),
    );
  });

  it("refuses an em outside a transaction, before writing", async () => {
    const order = anOrder();
    await expectRefused(
      db,
      () => enqueue(orm.em.fork(), order.events),
      /MikroORM EntityManager outside a transaction.*em\.transactional/,
    );
    await expectNothing(db, order.id);
  });
});
