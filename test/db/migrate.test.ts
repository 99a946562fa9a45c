import { mkdtemp, readdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { defaultMigrationsDir, migrate } from "../../functions/shared/db/migrate.ts";
import { MigrationError } from "../../functions/shared/outbox/errors.ts";
import { useEmptyDatabases } from "../support/db.ts";

const { emptyPool, cleanUpFirst } = useEmptyDatabases();

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

    const privateSchema = "outbox_private:Billing Events.Out-box$events";
    const { rows } = await pool.query(
      `select table_schema, table_name, table_type from information_schema.tables
       where table_schema = any($1::text[]) order by 2`,
      [["Billing Events", privateSchema]],
    );
    const table = (schema: string, name: string, type = "BASE TABLE") => ({
      table_schema: schema,
      table_name: name,
      table_type: type,
    });
    expect(rows).toEqual(
      [
        table("Billing Events", "Out-box$events"),
        table("Billing Events", "Out-box$events_migrations"),
        table("Billing Events", "Out-box$events_relay_handover"),
        table("Billing Events", "Out-box$events_dead_letters", "VIEW"),
        // 0016 moved what definer code and the relay read into the outbox's private schema: 0006's marks,
        // 0009's roles, 0011's counter of what the delete retention mode published, 0012's payload limit.
        table(privateSchema, "Out-box$events_group_high_water"),
        table(privateSchema, "Out-box$events_roles"),
        table(privateSchema, "Out-box$events_deleted_on_publish"),
        table(privateSchema, "Out-box$events_limits"),
      ].sort((a, b) => a.table_name.localeCompare(b.table_name)),
    );
    // Its roles' names (0009): `outbox_relay:<database>.Billing Events.Out-box$events` is over Postgres's 63
    // bytes, so an md5 of the outbox's full name stands for it.
    const { rows: roles } = await pool.query(
      `select job, role_name = 'outbox_' || job || ':' || md5(current_database() || '.Billing Events.Out-box$events')
              as hashed
       from "${privateSchema}"."Out-box$events_roles" order by job`,
    );
    expect(roles).toEqual([
      { job: "purge", hashed: true },
      { job: "relay", hashed: true },
    ]);
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

  it("refuses a pool of one session before it changes anything (a concurrent index build needs two)", async () => {
    const database = await emptyPool();
    const single = new pg.Pool({ connectionString: database.options.connectionString, max: 1 });
    cleanUpFirst(() => single.end());

    const error = await migrate(single).catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(MigrationError);
    expect((error as Error).message).toMatch(
      /^migrate needs a pool of at least 2 sessions, and this one has max: 1: 0003_claim_heads_index.sql builds/,
    );
    const { rows } = await database.query("select to_regclass('public.outbox_events') as events");
    expect(rows[0]).toEqual({ events: null });
  });

  it("finds the package's migrations folder", () => {
    expect(defaultMigrationsDir()).toMatch(/migrations$/);
  });

  describe("behind a session holding a conflicting lock", () => {
    /** A table migrated by 0001, an ALTER in 0002, and a session in a transaction that read the table. */
    async function blockedMigration() {
      const pool = await emptyPool();
      const dir = await mkdtemp(join(tmpdir(), "migrations-"));
      await writeFile(join(dir, "0001_thing.sql"), "create table {{related:thing}} (id int);");
      await migrate(pool, { migrationsDir: dir });
      await writeFile(join(dir, "0002_note.sql"), "alter table {{related:thing}} add column note text;");
      // A long transaction that read the table holds ACCESS SHARE until it ends; ALTER needs ACCESS EXCLUSIVE.
      const blocker = await pool.connect();
      await blocker.query("begin");
      await blocker.query("select count(*) from public.outbox_thing");
      let open = true;
      const endBlocker = async () => {
        if (!open) return;
        open = false;
        await blocker.query("commit");
        blocker.release();
      };
      cleanUpFirst(endBlocker);
      return { pool, dir, endBlocker };
    }

    /** Polls the server until the runner's ALTER is (or is no longer) waiting for its lock; 30 s at most. */
    async function alterWaiting(pool: pg.Pool, waiting: boolean) {
      const deadline = Date.now() + 30_000;
      for (;;) {
        if (Date.now() > deadline) {
          throw new Error(`the migration's ALTER is ${waiting ? "still not" : "still"} waiting after 30 s`);
        }
        const { rows } = await pool.query(
          `select count(*)::int as n from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock' and query like 'alter table%'`,
        );
        if (rows[0].n > 0 === waiting) return;
        await new Promise((resolve) => setImmediate(resolve));
      }
    }

    it("retries after lock_timeout, fails naming the file and the cause, and never holds producers behind its DDL", async () => {
      const { pool, dir } = await blockedMigration();

      const migration = migrate(pool, {
        migrationsDir: dir,
        lockTimeoutMs: 300,
        lockAttempts: 3,
        lockRetryPauseMs: 50,
      }).catch((caught: unknown) => caught);
      await alterWaiting(pool, true);
      // A producer's INSERT (ROW EXCLUSIVE) queues behind the waiting ALTER. Its own lock_timeout, 10 times the
      // runner's, turns "stuck behind the DDL until the blocker ends" into a failure instead of a hang.
      const producer = await pool.connect();
      await producer.query("set lock_timeout = '3s'");
      try {
        await producer.query("insert into public.outbox_thing (id) values (1)");
      } finally {
        producer.release();
      }
      // The blocker still holds its lock: what let the producer through is the runner stepping aside.
      const { rows: stillBlocked } = await pool.query(
        "select count(*)::int as n from pg_locks l join pg_class c on c.oid = l.relation where c.relname = 'outbox_thing' and l.mode = 'AccessShareLock' and l.granted",
      );
      expect(stillBlocked[0].n).toBeGreaterThan(0);
      const error = await migration;

      expect(error).toBeInstanceOf(MigrationError);
      expect((error as Error).message).toMatch(
        /migration 0002_note\.sql could not take its locks: lock_timeout \(300 ms\) expired in each of 3 attempts .*pg_stat_activity/,
      );
      // The cause chain ends in Postgres's lock_not_available.
      const postgresError = ((error as Error).cause as Error).cause as { code?: string };
      expect(postgresError.code).toBe("55P03");
      const { rows } = await pool.query("select name from public.outbox_migrations order by name");
      expect(rows.map((row) => row.name)).toEqual(["0001_thing.sql"]);
    });

    it("applies the file on a later attempt once the blocking transaction ends", async () => {
      const { pool, dir, endBlocker } = await blockedMigration();

      const migration = migrate(pool, {
        migrationsDir: dir,
        lockTimeoutMs: 200,
        lockAttempts: 5,
        lockRetryPauseMs: 50,
      });
      await alterWaiting(pool, true);
      // The first attempt gave up (lock_timeout) and the runner is pausing or waiting again: end the blocker.
      await alterWaiting(pool, false);
      await endBlocker();
      const result = await migration;

      expect(result.applied).toEqual(["0002_note.sql"]);
      const { rows } = await pool.query(
        "select column_name from information_schema.columns where table_name = 'outbox_thing' order by 1",
      );
      expect(rows.map((row) => row.column_name)).toEqual(["id", "note"]);
    });
  });
});
