import { createHash } from "node:crypto";
import { copyFile, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { migrateInbox } from "../../functions/shared/consumer/index.ts";
import { defaultMigrationsDir, migrate } from "../../functions/shared/db/migrate.ts";
import { MigrationError } from "../../functions/shared/outbox/errors.ts";
import { useEmptyDatabases } from "../support/db.ts";
import { asRole, quoteRole, uniqueRoleName } from "../support/roles.ts";

/**
 * Issue 39, findings 4 and 9: the migration runner adopted what a less privileged role created first under the
 * migrations' names (the ledger, a table under an index's name, the outbox's roles). Each is refused now, before
 * anything is applied, with an error that names it.
 */
const { emptyPool, cleanUpFirst } = useEmptyDatabases();

/** A role with CREATE on `public` and nothing else: what every role has on PG 14. */
async function squatter(pool: Awaited<ReturnType<typeof emptyPool>>): Promise<string> {
  const role = uniqueRoleName("squatter");
  await pool.query(`create role ${quoteRole(role)} nologin`);
  await pool.query(`grant create, usage on schema public to ${quoteRole(role)}`);
  cleanUpFirst(async () => {
    await pool.query(`drop owned by ${quoteRole(role)}`).catch(() => {});
    await pool.query(`drop role if exists ${quoteRole(role)}`).catch(() => {});
  });
  return role;
}

/** The package's migrations up to and including `last`, in a folder of their own. */
async function migrationsUpTo(last: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "migrations-"));
  const source = defaultMigrationsDir();
  for (const name of await readdir(source)) {
    if (name.endsWith(".sql") && name <= last) await copyFile(join(source, name), join(dir, name));
  }
  cleanUpFirst(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

describe("the migration runner adopts nothing it did not create", () => {
  it("refuses a ledger another role created first, with the files it marked applied (finding 4)", async () => {
    const pool = await emptyPool();
    const role = await squatter(pool);
    await asRole(pool, role, async (client) => {
      await client.query(
        "create table public.outbox_migrations (name text primary key, checksum text not null, applied_at timestamptz not null default now())",
      );
    });

    const error = await migrate(pool).catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(MigrationError);
    expect(String(error)).toContain(`relation "public"."outbox_migrations" (owned by ${role})`);
    const { rows } = await pool.query("select to_regclass('public.outbox_events') as outbox");
    expect(rows[0]?.outbox).toBeNull();
  });

  it("refuses a table planted under the name of an index a later migration builds (finding 4)", async () => {
    const pool = await emptyPool();
    await migrate(pool, { migrationsDir: await migrationsUpTo("0013_trace_context.sql") });
    const role = await squatter(pool);
    await asRole(pool, role, (client) => client.query("create table public.outbox_pending_dead (x int)"));

    const error = await migrate(pool).catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(MigrationError);
    expect(String(error)).toContain(`relation "public"."outbox_pending_dead" (owned by ${role})`);
  });

  it("refuses an inbox table and ledger another role created first (finding 4, migrateInbox)", async () => {
    const pool = await emptyPool();
    const role = await squatter(pool);
    const dir = join(defaultMigrationsDir(), "inbox");
    const files = (await readdir(dir)).filter((name) => name.endsWith(".sql"));
    await asRole(pool, role, async (client) => {
      await client.query(
        "create table public.inbox_migrations (name text primary key, checksum text not null, applied_at timestamptz not null default now())",
      );
      // Every file marked applied with the public package's checksums, and an inbox of its own making.
      for (const name of files) {
        const checksum = createHash("sha256")
          .update(await readFile(join(dir, name), "utf8"))
          .digest("hex");
        await client.query("insert into public.inbox_migrations (name, checksum) values ($1, $2)", [
          name,
          checksum,
        ]);
      }
      await client.query(
        "create table public.inbox (consumer text, outbox_id uuid, event_type text, aggregate_type text, aggregate_id text, processed_at timestamptz default now(), primary key (consumer, outbox_id))",
      );
    });

    const error = await migrateInbox(pool).catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(MigrationError);
    expect(String(error)).toContain(`relation "public"."inbox" (owned by ${role})`);
    expect(String(error)).toContain(`relation "public"."inbox_migrations" (owned by ${role})`);
  });

  it("refuses to adopt an outbox role a CREATEROLE user created first as a login (finding 9)", async () => {
    const pool = await emptyPool();
    const { rows } = await pool.query<{ database: string }>("select current_database() as database");
    const squatted = `outbox_relay:${rows[0]?.database}.public.outbox_events`;
    const creator = uniqueRoleName("creator");
    await pool.query(`create role ${quoteRole(creator)} createrole nologin`);
    cleanUpFirst(async () => {
      await pool.query(`drop role if exists ${quoteRole(squatted)}`).catch(() => {});
      await pool.query(`drop role if exists ${quoteRole(creator)}`).catch(() => {});
    });
    await asRole(pool, creator, (client) =>
      client.query(`create role ${quoteRole(squatted)} login password 'chosen-by-the-squatter'`),
    );

    const error = await migrate(pool).catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(MigrationError);
    expect(String(error)).toMatch(
      /0009_no_back_doors\.sql would give this outbox's rights to role "outbox_relay:/,
    );
    const { rows: granted } = await pool.query(
      "select has_table_privilege($1, 'public.outbox_events', 'select') as reads",
      [squatted],
    );
    expect(granted[0]?.reads).toBe(false);
  });
});
