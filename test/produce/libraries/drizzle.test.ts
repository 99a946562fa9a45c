import { sql } from "drizzle-orm";
import { drizzle as drizzlePg } from "drizzle-orm/node-postgres";
import { integer, pgTable, text } from "drizzle-orm/pg-core";
import { drizzle as drizzlePostgresJs } from "drizzle-orm/postgres-js";
import pg from "pg";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
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
const orders = pgTable("library_orders", { id: text("id").primaryKey(), total: integer("total").notNull() });
const clients: postgres.Sql[] = [];
const pools: pg.Pool[] = [];
afterAll(() => Promise.all([...clients, ...pools].map((client) => client.end())));

const drivers = {
  "node-postgres": () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    pools.push(pool);
    return drizzlePg({ client: pool });
  },
  "postgres.js": () => {
    const client = postgres(db.url, { max: 2, onnotice: () => {} });
    clients.push(client);
    return drizzlePostgresJs({ client });
  },
};

describe.each(Object.entries(drivers))("enqueue with Drizzle on %s", (driver, connect) => {
  it("the tx of db.transaction: commit keeps the order and its events", async () => {
    const orm = connect();
    const order = anOrder();
    const written = await orm.transaction(async (tx) => {
      await tx.insert(orders).values({ id: order.id, total: order.total });
      return enqueue(tx, order.events);
    });
    await expectCommitted(db, order, written);
  });

  it("rollback (tx.rollback() or a throw) drops both", async () => {
    const orm = connect();
    const order = anOrder();
    await expect(
      orm.transaction(async (tx) => {
        await tx.insert(orders).values({ id: order.id, total: order.total });
        await enqueue(tx, order.events);
        tx.rollback();
      }),
    ).rejects.toThrow(/rollback/i);
    const other = anOrder();
    await expect(
      orm.transaction(async (tx) => {
        await tx.execute(sql`insert into library_orders (id, total) values (${other.id}, 1)`);
        await enqueue(tx, other.events);
        throw new Rollback();
      }),
    ).rejects.toBeInstanceOf(Rollback);
    await expectNothing(db, order.id);
    await expectNothing(db, other.id);
  });

  it("a missing outbox table: says to run `outbox migrate`", async () => {
    await expectNotMigrated(() => connect().transaction((tx) => enqueue(tx, anOrder().events, NOT_MIGRATED)));
  });

  it("refuses the root db and its $client, before writing", async () => {
    const orm = connect();
    const order = anOrder();
    await expectRefused(
      db,
      // @ts-expect-error the root db is not a transaction
      () => enqueue(orm, order.events),
      /Drizzle database outside a transaction.*db\.transaction/,
    );
    await expectRefused(
      db,
      // @ts-expect-error a pool, or postgres.js's root sql, is not a transaction
      () => enqueue(orm.$client, order.events),
      driver === "node-postgres" ? /a pg\.Pool/ : /postgres\.js sql outside a transaction/,
    );
    await expectNothing(db, order.id);
  });
});
