import pg from "pg";
import { describe, it } from "vitest";
import { enqueue } from "../../../functions/shared/produce/enqueue.ts";
import {
  anOrder,
  expectCommitted,
  expectNothing,
  expectNotMigrated,
  expectRefused,
  NOT_MIGRATED,
  useOrdersDatabase,
} from "./orders.ts";

const db = useOrdersDatabase();

describe("enqueue with pg", () => {
  it("a PoolClient after begin: commit keeps the order and its events", async () => {
    const order = anOrder();
    const client = await db.pool.connect();
    try {
      await client.query("begin");
      await client.query(order.insert, [order.id, order.total]);
      const written = await enqueue(client, order.events);
      await client.query("commit");
      await expectCommitted(db, order, written);
    } finally {
      client.release();
    }
  });

  it("a Client after begin: rollback drops both", async () => {
    const order = anOrder();
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query("begin");
      await client.query(order.insert, [order.id, order.total]);
      await enqueue(client, order.events);
      await client.query("rollback");
      await expectNothing(db, order.id);
    } finally {
      await client.end();
    }
  });

  it("a missing outbox table: says to run `outbox migrate`", async () => {
    const client = await db.pool.connect();
    try {
      await client.query("begin");
      await expectNotMigrated(() => enqueue(client, anOrder().events, NOT_MIGRATED));
    } finally {
      await client.query("rollback");
      client.release();
    }
  });

  it("refuses a pg.Pool and a client in autocommit, before writing", async () => {
    const order = anOrder();
    // @ts-expect-error a pool is not a transaction
    await expectRefused(db, () => enqueue(db.pool, order.events), /a pg\.Pool .*pool\.connect\(\)/);
    const client = await db.pool.connect();
    try {
      await client.query("select 1");
      await expectRefused(
        db,
        () => enqueue(client, order.events),
        /a pg client outside a transaction.*begin/,
      );
    } finally {
      client.release();
    }
    await expectNothing(db, order.id);
  });
});
