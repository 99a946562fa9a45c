import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type pg from "pg";
import { describe, expect, it } from "vitest";
import { migrate } from "../../functions/shared/db/migrate.ts";
import { MigrationError } from "../../functions/shared/outbox/errors.ts";
import { useEmptyDatabases } from "../support/db.ts";

const { emptyPool } = useEmptyDatabases();

const CLAIM_INDEX_MIGRATION = "0007_group_claim_indexes.sql";

async function indexState(pool: pg.Pool, name: string) {
  const { rows } = await pool.query(
    `select i.indisvalid as valid, pg_get_indexdef(i.indexrelid) as definition
     from pg_index as i join pg_class as c on c.oid = i.indexrelid where c.relname = $1`,
    [name],
  );
  return rows;
}

describe("migrations outside a transaction (create index concurrently)", () => {
  it("builds the claim's index concurrently and drops the index it replaces", async () => {
    const pool = await emptyPool();

    const result = await migrate(pool);

    expect(result.applied).toContain(CLAIM_INDEX_MIGRATION);
    // 0003 built pending_live and dropped pending_seq; 0007 replaced pending_live by the group's index.
    expect(await indexState(pool, "outbox_pending_group_live")).toEqual([
      {
        valid: true,
        definition:
          "CREATE INDEX outbox_pending_group_live ON public.outbox_events USING btree (aggregate_id, seq) WHERE ((processed_at IS NULL) AND (dead_lettered_at IS NULL))",
      },
    ]);
    expect(await indexState(pool, "outbox_pending_seq")).toEqual([]);
    expect(await indexState(pool, "outbox_pending_live")).toEqual([]);
  });

  it("rebuilds an index that a failed concurrent build left INVALID instead of accepting it", async () => {
    const pool = await emptyPool();
    await migrate(pool);
    // What a build cut short (lock timeout, cancel, crash) leaves: an invalid index under the name, no ledger row.
    await pool.query("delete from outbox_migrations where name = $1", [CLAIM_INDEX_MIGRATION]);
    await pool.query("drop index outbox_pending_group_live");
    await pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
       values ('order', 'a', 'e', '{}'), ('order', 'b', 'e', '{}')`,
    );
    await expect(
      pool.query(
        "create unique index concurrently outbox_pending_group_live on outbox_events (aggregate_type)",
      ),
    ).rejects.toThrow(/could not create unique index/);
    expect((await indexState(pool, "outbox_pending_group_live"))[0]?.valid).toBe(false);

    const result = await migrate(pool);

    expect(result.applied).toEqual([CLAIM_INDEX_MIGRATION]);
    const [index] = await indexState(pool, "outbox_pending_group_live");
    expect(index?.valid).toBe(true);
    expect(index?.definition).toContain("(aggregate_id, seq) WHERE");
  });

  it("refuses a concurrent build without `if not exists`, which a retry could not resume", async () => {
    const pool = await emptyPool();
    const dir = await mkdtemp(join(tmpdir(), "migrations-"));
    await writeFile(join(dir, "0001_table.sql"), "create table {{table}} (id int);");
    await writeFile(
      join(dir, "0002_index.sql"),
      "-- migrate: no-transaction\ncreate index concurrently {{name:by_id}} on {{table}} (id);\n",
    );

    const attempt = migrate(pool, { migrationsDir: dir });

    await expect(attempt).rejects.toThrow(MigrationError);
    await expect(attempt).rejects.toThrow(/0002_index\.sql.*if not exists/);
  });
});
