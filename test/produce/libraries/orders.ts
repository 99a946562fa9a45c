import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, expect } from "vitest";
import { NotMigratedError, ValidationError } from "../../../functions/shared/outbox/errors.ts";
import type { EnqueuedEvent } from "../../../functions/shared/produce/enqueue.ts";
import { type TestDatabase, useTestDatabase } from "../../support/db.ts";
import { anEvent } from "../../support/factories.ts";

/**
 * What each library test does with its library's transaction (issue 32): a business row and three events of one
 * order, committed together or rolled back together; a handle outside a transaction refused before it writes.
 */
export function useOrdersDatabase(): TestDatabase {
  const db = useTestDatabase();
  beforeAll(async () => {
    await db.pool.query("create table library_orders (id text primary key, total int not null)");
  });
  return db;
}

export function anOrder() {
  const id = `order-${randomUUID()}`;
  return {
    id,
    total: 42,
    events: ["order.placed", "order.paid", "order.shipped"].map((eventType, i) =>
      anEvent({ aggregateType: "order", aggregateId: id, eventType, payload: { id, step: i, when: "now" } }),
    ),
    insert: "insert into library_orders (id, total) values ($1, $2)",
  };
}

/** The order and exactly its events, in order, with their payloads and headers as given. */
export async function expectCommitted(
  db: TestDatabase,
  order: ReturnType<typeof anOrder>,
  written: EnqueuedEvent[],
) {
  expect(written).toHaveLength(3);
  const orders = await db.pool.query("select total from library_orders where id = $1", [order.id]);
  expect(orders.rows).toEqual([{ total: 42 }]);
  const { rows } = await db.pool.query(
    "select id, seq, event_type, payload, headers from outbox_events where aggregate_id = $1 order by seq",
    [order.id],
  );
  expect(rows.map((row) => row.id)).toEqual(written.map((event) => event.id));
  expect(rows.map((row) => BigInt(row.seq))).toEqual(written.map((event) => event.seq));
  expect(rows.map((row) => row.event_type)).toEqual(order.events.map((event) => event.eventType));
  expect(rows.map((row) => row.payload)).toEqual(order.events.map((event) => event.payload));
  expect(rows.map((row) => row.headers)).toEqual(order.events.map((event) => event.headers ?? {}));
}

/** Neither the order nor any event of it. */
export async function expectNothing(db: TestDatabase, orderId: string) {
  const orders = await db.pool.query("select 1 from library_orders where id = $1", [orderId]);
  expect(orders.rowCount).toBe(0);
  const events = await db.pool.query("select 1 from outbox_events where aggregate_id = $1", [orderId]);
  expect(events.rowCount).toBe(0);
}

/** Refused with a ValidationError that names the handle and what to pass instead, and nothing written. */
export async function expectRefused(db: TestDatabase, attempt: () => Promise<unknown>, handle: RegExp) {
  const before = await db.pool.query("select count(*)::int as n from outbox_events");
  const error = await attempt().then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(ValidationError);
  expect((error as Error).message).toMatch(handle);
  expect((error as Error).message).toMatch(/pass/);
  const after = await db.pool.query("select count(*)::int as n from outbox_events");
  expect(after.rows[0].n).toBe(before.rows[0].n);
}

/** An outbox table the migrations never made: enqueue's options for it. */
export const NOT_MIGRATED = { table: "never_migrated_events" };

/** 42P01 from the library's transaction comes back as a NotMigratedError saying to run `outbox migrate`. */
export async function expectNotMigrated(attempt: () => Promise<unknown>) {
  const error = await attempt().then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(NotMigratedError);
  expect((error as Error).message).toMatch(
    /^the outbox table "public"\."never_migrated_events" does not exist in this database: run `outbox migrate` first \(or check the schema and table options\) \(42P01: /,
  );
}

/** Thrown inside a library's transaction callback to roll it back. */
export class Rollback extends Error {}

/** The release of `name` the tests run against: the matrix project's (vitest.libraries.config.ts), else this repository's. */
export function installedVersion(name: string): string {
  const root = process.env.OUTBOX_TEST_LIBRARIES ?? fileURLToPath(new URL("../../..", import.meta.url));
  return JSON.parse(readFileSync(join(root, "node_modules", name, "package.json"), "utf8")).version;
}
