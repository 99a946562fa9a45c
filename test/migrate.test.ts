import { mkdtemp, readdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { MigrationError } from "../functions/shared/errors.ts";
import { defaultMigrationsDir, migrate } from "../functions/shared/migrate.ts";
import { createEmptyDatabase } from "./support/db.ts";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function emptyPool() {
  const database = await createEmptyDatabase();
  const pool = new pg.Pool({ connectionString: database.url, max: 4 });
  pool.on("error", () => {}); // `drop database ... with (force)` may end a session pool.end() is still closing
  cleanups.push(async () => {
    await pool.end();
    await database.drop();
  });
  return pool;
}

describe("migrate", () => {
  it("applies every migration to an empty database, and a second run is a no-op", async () => {
    const pool = await emptyPool();

    const first = await migrate(pool);
    const second = await migrate(pool);

    expect(first.applied.length).toBeGreaterThan(0);
    expect(first.alreadyApplied).toEqual([]);
    expect(second.applied).toEqual([]);
    expect(second.alreadyApplied).toEqual(first.applied);
    const { rows } = await pool.query("select name from public.outbox_migrations order by name");
    expect(rows.map((row) => row.name)).toEqual(first.applied);
  });

  it("lets two runners start at once without failing or applying anything twice", async () => {
    const pool = await emptyPool();

    const results = await Promise.all([migrate(pool), migrate(pool), migrate(pool)]);

    const appliedCounts = new Map<string, number>();
    for (const name of results.flatMap((result) => result.applied)) {
      appliedCounts.set(name, (appliedCounts.get(name) ?? 0) + 1);
    }
    expect([...appliedCounts.values()].every((count) => count === 1)).toBe(true);
    const migrationFiles = (await readdir(defaultMigrationsDir())).filter((name) => name.endsWith(".sql"));
    expect(appliedCounts.size).toBe(migrationFiles.length);
    const { rows } = await pool.query("select count(*)::int as n from public.outbox_migrations");
    expect(rows[0].n).toBe(appliedCounts.size);
  });

  it("creates the outbox under a configured schema and table with odd but legal characters", async () => {
    const pool = await emptyPool();

    await migrate(pool, { schema: "Billing Events", table: "Out-box$events" });

    const { rows } = await pool.query(
      "select table_schema, table_name, table_type from information_schema.tables where table_schema = $1 order by 2",
      ["Billing Events"],
    );
    expect(rows).toEqual(
      [
        { table_schema: "Billing Events", table_name: "Out-box$events", table_type: "BASE TABLE" },
        { table_schema: "Billing Events", table_name: "Out-box$events_migrations", table_type: "BASE TABLE" },
        { table_schema: "Billing Events", table_name: "Out-box$events_dead_letters", table_type: "VIEW" },
      ].sort((a, b) => a.table_name.localeCompare(b.table_name)),
    );
  });

  it("refuses a migration whose content changed after it was applied", async () => {
    const pool = await emptyPool();
    const dir = await mkdtemp(join(tmpdir(), "migrations-"));
    await writeFile(join(dir, "0001_first.sql"), "create table {{related:thing}} (id int);");
    await migrate(pool, { migrationsDir: dir });
    await writeFile(join(dir, "0001_first.sql"), "create table {{related:thing}} (id bigint);");

    await expect(migrate(pool, { migrationsDir: dir })).rejects.toThrow(
      /0001_first.sql was applied with different content/,
    );
  });

  it("rolls back a failing migration and reports which file failed", async () => {
    const pool = await emptyPool();
    const dir = await mkdtemp(join(tmpdir(), "migrations-"));
    await writeFile(join(dir, "0001_ok.sql"), "create table {{related:ok}} (id int);");
    await writeFile(
      join(dir, "0002_broken.sql"),
      "create table {{related:half}} (id int); select nonsense from nowhere;",
    );

    const error = await migrate(pool, { migrationsDir: dir }).catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(MigrationError);
    expect((error as Error).message).toMatch(/0002_broken.sql failed/);
    const { rows } = await pool.query(
      "select to_regclass('public.outbox_ok') as ok, to_regclass('public.outbox_half') as half",
    );
    expect(rows[0]).toEqual({ ok: "outbox_ok", half: null });
  });

  it("finds the package's migrations folder", () => {
    expect(defaultMigrationsDir()).toMatch(/migrations$/);
  });
});
