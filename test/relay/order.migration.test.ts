import { copyFile, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultMigrationsDir, migrate } from "../../functions/shared/db/migrate.ts";
import { MigrationError } from "../../functions/shared/outbox/errors.ts";
import { createEmptyDatabase } from "../support/db.ts";

const COMMIT_ORDER = "0005_commit_order.sql";
let database: Awaited<ReturnType<typeof createEmptyDatabase>>;
let pool: pg.Pool;
let before: string;

// An outbox as it was before migration 0005, with rows in it: the upgrade happens in place.
beforeAll(async () => {
  database = await createEmptyDatabase();
  pool = new pg.Pool({ connectionString: database.url, max: 4 });
  pool.on("error", () => {});
  before = await mkdtemp(join(tmpdir(), "outbox-before-0005-"));
  for (const name of await readdir(defaultMigrationsDir())) {
    if (name.endsWith(".sql") && name < COMMIT_ORDER) {
      await copyFile(join(defaultMigrationsDir(), name), join(before, name));
    }
  }
  await migrate(pool, { migrationsDir: before });
  await pool.query(
    `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
     select 'order', 'order-' || g, 'order.created', '{}' from generate_series(1, 50) as g`,
  );
});
afterAll(async () => {
  await pool.end();
  await database.drop();
  await rm(before, { recursive: true, force: true });
});

const insertOne = (db: pg.Pool | pg.PoolClient, aggregateId: string) =>
  db.query<{ seq: string }>(
    "insert into outbox_events (aggregate_type, aggregate_id, event_type, payload) values ('order', $1, 'order.created', '{}') returning seq",
    [aggregateId],
  );

describe("migration 0005 on a live outbox", () => {
  it("gives up after its lock timeout instead of queueing producers behind an open write transaction", async () => {
    const producer = await pool.connect();
    try {
      await producer.query("begin");
      await insertOne(producer, "order-open");
      const started = Date.now();

      const attempt = await migrate(pool, {
        lockTimeoutMs: 300,
        lockAttempts: 2,
        lockRetryPauseMs: 100,
      }).catch((error: unknown) => error);

      expect(attempt).toBeInstanceOf(MigrationError);
      expect((attempt as Error).message).toMatch(
        /migration 0005_commit_order\.sql could not take its locks: lock_timeout \(300 ms\) expired in each of 2 attempts/,
      );
      expect(Date.now() - started).toBeLessThan(10_000);
      await producer.query("commit");
    } finally {
      producer.release();
    }
    const { rows } = await pool.query("select count(*)::int as n from outbox_migrations where name = $1", [
      COMMIT_ORDER,
    ]);
    expect(rows[0].n).toBe(0);
  });

  it("installs the trigger without rewriting the table, and new rows order after the existing ones", async () => {
    const fileBefore = await pool.query<{ file: string }>(
      "select pg_relation_filenode('outbox_events')::text as file",
    );
    const { rows: old } = await pool.query<{ max: string }>(
      "select max(seq)::text as max from outbox_events",
    );

    const result = await migrate(pool);

    // Every later file follows (0006, 0007, 0008, ...), none rewriting the table: the file node below is the same.
    const fromCommitOrder = (await readdir(defaultMigrationsDir()))
      .filter((name) => name.endsWith(".sql") && name >= COMMIT_ORDER)
      .sort();
    expect(result.applied).toEqual(fromCommitOrder);
    expect(result.applied).toContain("0006_group_order_and_text_bound.sql");
    const fileAfter = await pool.query<{ file: string }>(
      "select pg_relation_filenode('outbox_events')::text as file",
    );
    expect(fileAfter.rows[0]?.file).toBe(fileBefore.rows[0]?.file);
    const { rows: triggers } = await pool.query(
      "select tgenabled from pg_trigger where tgrelid = 'outbox_events'::regclass and tgname = 'outbox_commit_order'",
    );
    expect(triggers).toEqual([{ tgenabled: "A" }]); // ALWAYS since 0006
    const { rows: fresh } = await insertOne(pool, "order-1");
    expect(BigInt(fresh[0]?.seq ?? 0)).toBeGreaterThan(BigInt(old[0]?.max ?? 0));
  });
});
