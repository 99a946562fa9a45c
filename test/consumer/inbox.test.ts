import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { migrateInbox, purgeInbox } from "../../functions/shared/consumer/index.ts";
import { createEmptyDatabase, useTestDatabase } from "../support/db.ts";

const db = useTestDatabase();

async function insertInboxRows(pool: pg.Pool, schema: string, count: number, ageHours: number) {
  await pool.query(
    `insert into "${schema}".inbox (outbox_id, event_type, aggregate_type, aggregate_id, processed_at)
     select gen_random_uuid(), 'order.placed', 'order', 'order-' || n, now() - $2::integer * interval '1 hour'
     from generate_series(1, $1::integer) as n`,
    [count, ageHours],
  );
}

async function countByAge(pool: pg.Pool, schema: string) {
  const { rows } = await pool.query<{ old: number; young: number }>(
    `select count(*) filter (where processed_at < now() - interval '42 days')::int as old,
            count(*) filter (where processed_at >= now() - interval '42 days')::int as young
     from "${schema}".inbox`,
  );
  return rows[0];
}

describe("the inbox table", () => {
  it("is created by its own migration set, with a ledger apart from the outbox's, and re-running is a no-op", async () => {
    const empty = await createEmptyDatabase();
    const pool = new pg.Pool({ connectionString: empty.url, max: 2 });
    try {
      const first = await migrateInbox(pool, { schema: "orders_consumer" });
      const again = await migrateInbox(pool, { schema: "orders_consumer" });
      const files = [
        "0001_inbox.sql",
        "0002_consumer_key.sql",
        "0003_consumer_positions.sql",
        "0004_position_origin.sql",
        "0005_commits_with_record.sql",
      ];
      expect(first.applied).toEqual(files);
      expect(again).toEqual({ applied: [], alreadyApplied: files });
      const { rows } = await pool.query<{ table_name: string }>(
        "select table_name from information_schema.tables where table_schema = 'orders_consumer' order by 1",
      );
      // No outbox table: the inbox lives in the consumer's database and brings nothing of the outbox with it.
      expect(rows.map((row) => row.table_name)).toEqual(["inbox", "inbox_migrations", "inbox_positions"]);
    } finally {
      await pool.end();
      await empty.drop();
    }
  });

  it("refuses a table name that is not an accepted identifier, naming the setting", async () => {
    await expect(migrateInbox(db.pool, { table: 'inbox"; drop table x; --' })).rejects.toThrow(
      /table: .* is not an accepted identifier/,
    );
  });
});

describe("purgeInbox", () => {
  it("deletes only rows older than the retention, at most batchSize x maxBatches per call", async () => {
    await migrateInbox(db.pool, { schema: "purge_test" });
    await insertInboxRows(db.pool, "purge_test", 25, 50 * 24);
    await insertInboxRows(db.pool, "purge_test", 7, 41 * 24);

    const first = await purgeInbox(db.pool, { schema: "purge_test", batchSize: 10, maxBatches: 2 });
    expect(first).toEqual({ deletedRows: 20, batches: 2, drained: false });
    expect(await countByAge(db.pool, "purge_test")).toEqual({ old: 5, young: 7 });

    const second = await purgeInbox(db.pool, { schema: "purge_test", batchSize: 10, maxBatches: 2 });
    expect(second).toEqual({ deletedRows: 5, batches: 1, drained: true });
    expect(await countByAge(db.pool, "purge_test")).toEqual({ old: 0, young: 7 });
  });

  it("refuses a retention shorter than a redriven FIFO message can still arrive (42 days), naming the option and the limit", async () => {
    await expect(purgeInbox(db.pool, { retentionHours: 720 })).rejects.toThrow(
      /retentionHours must be an integer from 1008 to 87600, got 720/,
    );
    await expect(purgeInbox(db.pool, { batchSize: 0 })).rejects.toThrow(
      /batchSize must be an integer from 1/,
    );
  });
});

describe("the package's consumer entry point", () => {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
  const keysOf = (specifier: string) =>
    execFileSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `console.log(Object.keys(await import(${JSON.stringify(specifier)})).join(","))`,
      ],
      { cwd: new URL("../..", import.meta.url), encoding: "utf8" },
    )
      .trim()
      .split(",");

  // `npm test` builds before the suite runs; this is what `import ... from "aws-outbox-relay/consumer"` gets.
  it("exports createInboxHandler, migrateInbox and purgeInbox from the subpath, and none of it from the main entry", () => {
    expect(keysOf(`${pkg.name}/consumer`)).toEqual(
      expect.arrayContaining(["createInboxHandler", "migrateInbox", "purgeInbox", "parseInboxEvent"]),
    );
    expect(keysOf(pkg.name)).not.toContain("createInboxHandler");
    expect(pkg.exports["./consumer"].types).toBe("./dist/functions/shared/consumer/index.d.ts");
  });
});
