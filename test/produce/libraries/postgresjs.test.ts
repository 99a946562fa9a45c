import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue } from "../../../functions/shared/produce/enqueue.ts";
import {
  anOrder,
  expectCommitted,
  expectNothing,
  expectNotMigrated,
  expectRefused,
  installedVersion,
  NOT_MIGRATED,
  Rollback,
  useOrdersDatabase,
} from "./orders.ts";

const db = useOrdersDatabase();
let sql: postgres.Sql;
beforeAll(() => {
  sql = postgres(db.url, { max: 2, onnotice: () => {} });
});
afterAll(() => sql.end());

describe("enqueue with postgres.js", () => {
  it("the sql of sql.begin: commit keeps the order and its events", async () => {
    const order = anOrder();
    const written = await sql.begin(async (tx) => {
      await tx`insert into library_orders (id, total) values (${order.id}, ${order.total})`;
      return enqueue(tx, order.events);
    });
    await expectCommitted(db, order, written);
  });

  it("rollback drops both", async () => {
    const order = anOrder();
    await expect(
      sql.begin(async (tx) => {
        await tx`insert into library_orders (id, total) values (${order.id}, ${order.total})`;
        await enqueue(tx, order.events);
        throw new Rollback();
      }),
    ).rejects.toBeInstanceOf(Rollback);
    await expectNothing(db, order.id);
  });

  it("a missing outbox table: says to run `outbox migrate`", async () => {
    await expectNotMigrated(() => sql.begin((tx) => enqueue(tx, anOrder().events, NOT_MIGRATED)));
  });

  it("refuses the root sql and a reserved connection, before writing", async () => {
    const order = anOrder();
    await expectRefused(
      db,
      // @ts-expect-error the root sql is not a transaction
      () => enqueue(sql, order.events),
      /postgres\.js sql outside a transaction.*sql\.begin/,
    );
    // sql.reserve() came with postgres.js 3.4; the library matrix also runs 3.3 (test/produce/libraries/versions.ts).
    if (typeof sql.reserve !== "function") {
      expect(installedVersion("postgres")).toMatch(/^3\.[0-3]\./);
    } else {
      const reserved = await sql.reserve();
      try {
        await expectRefused(
          db,
          // @ts-expect-error a reserved connection is not a transaction
          () => enqueue(reserved, order.events),
          /postgres\.js sql outside a transaction/,
        );
      } finally {
        reserved.release();
      }
    }
    await expectNothing(db, order.id);
  });
});
