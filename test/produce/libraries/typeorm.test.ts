import { DataSource } from "typeorm";
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
let dataSource: DataSource;
beforeAll(async () => {
  dataSource = new DataSource({ type: "postgres", url: db.url, poolSize: 2 });
  await dataSource.initialize();
});
afterAll(() => dataSource.destroy());

describe("enqueue with TypeORM", () => {
  it("the manager of dataSource.transaction: commit keeps the order and its events", async () => {
    const order = anOrder();
    const written = await dataSource.transaction(async (manager) => {
      await manager.query(order.insert, [order.id, order.total]);
      return enqueue(manager, order.events);
    });
    await expectCommitted(db, order, written);
  });

  it("a QueryRunner after startTransaction: commit keeps both, rollback drops both", async () => {
    const order = anOrder();
    const runner = dataSource.createQueryRunner();
    try {
      await runner.startTransaction();
      await runner.query(order.insert, [order.id, order.total]);
      const written = await enqueue(runner, order.events);
      await runner.commitTransaction();
      await expectCommitted(db, order, written);

      const other = anOrder();
      await runner.startTransaction();
      await runner.query(other.insert, [other.id, other.total]);
      await enqueue(runner, other.events);
      await runner.rollbackTransaction();
      await expectNothing(db, other.id);
    } finally {
      await runner.release();
    }
  });

  it("rollback drops both", async () => {
    const order = anOrder();
    await expect(
      dataSource.transaction(async (manager) => {
        await manager.query(order.insert, [order.id, order.total]);
        await enqueue(manager, order.events);
        throw new Rollback();
      }),
    ).rejects.toBeInstanceOf(Rollback);
    await expectNothing(db, order.id);
  });

  it("a missing outbox table: says to run `outbox migrate`", async () => {
    await expectNotMigrated(() =>
      dataSource.transaction((manager) => enqueue(manager, anOrder().events, NOT_MIGRATED)),
    );
  });

  it("refuses the data source's manager and a QueryRunner outside a transaction, before writing", async () => {
    const order = anOrder();
    await expectRefused(
      db,
      () => enqueue(dataSource.manager, order.events),
      /TypeORM EntityManager outside a transaction.*dataSource\.transaction/,
    );
    const runner = dataSource.createQueryRunner();
    try {
      await expectRefused(
        db,
        () => enqueue(runner, order.events),
        /TypeORM QueryRunner outside a transaction/,
      );
    } finally {
      await runner.release();
    }
    await expectRefused(
      db,
      // @ts-expect-error the DataSource itself is no handle
      () => enqueue(dataSource, order.events),
      /a TypeORM DataSource.*dataSource\.transaction/,
    );
    await expectNothing(db, order.id);
  });
});
