import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { MigrationError } from "../outbox/errors.ts";
import { type OutboxLocation, type OutboxNames, outboxNames, quoteIdent } from "../outbox/names.ts";
import { readText, textSetting } from "../util/settings.ts";
import { sleep } from "../util/sleep.ts";
import { ownRoles, type RolesChange } from "./rolesHere.ts";
import { type Queryable, type SessionClient, type SessionPool, withTransaction } from "./session.ts";
import { isLockNotAvailable } from "./sqlstate.ts";

export interface MigrateOptions extends OutboxLocation {
  /** Folder of `NNNN_name.sql` files; defaults to the package's own `migrations/`. */
  migrationsDir?: string;
  /** Longest wait for one lock (`lock_timeout`) before a file's transaction gives up. Default 1000 ms. */
  lockTimeoutMs?: number;
  /** Transactions tried per file when a lock is not granted in time. Default 10. */
  lockAttempts?: number;
  /** Pause after the first lock timeout; it doubles after each one, up to 15 s. Default 1000 ms. */
  lockRetryPauseMs?: number;
}

/**
 * DDL that waits for a lock waits in Postgres's lock queue, and every later request for a conflicting lock queues
 * behind it: an `alter table` waiting on one long transaction that read the outbox stops every producer's INSERT
 * until that transaction ends. A 1 s `lock_timeout` bounds what producers can suffer to 1 s per attempt; the
 * runner then steps aside, pauses, and tries again. 10 attempts with pauses of 1, 2, 4, 8, then 15 s take about
 * 100 s, inside the migrate Lambda's 5 minutes, before the deployment fails with the reason.
 */
export const DEFAULT_LOCK_TIMEOUT_MS = 1_000;
export const DEFAULT_LOCK_ATTEMPTS = 10;
export const DEFAULT_LOCK_RETRY_PAUSE_MS = 1_000;
const MAX_LOCK_RETRY_PAUSE_MS = 15_000;

export interface MigrateResult {
  applied: string[];
  alreadyApplied: string[];
  /**
   * Present when this database's outbox roles had been made for another database (a clone, a restore under
   * another name) and were renewed or recorded as this one's (rolesHere.ts): a renewed role has no members yet.
   */
  roles?: RolesChange[];
}

/**
 * The Postgres majors the package is tested on (docs/database.md "Supported Postgres versions"; the test matrix runs each).
 * An older server is refused before anything is applied: none has been tested, and AWS supports none of them any
 * more. A newer one is let through, since it is where an upgrade goes next.
 */
export const SUPPORTED_POSTGRES = [14, 15, 16, 17] as const;

export function refuseUnsupportedServer(versionNum: number, version: string): void {
  if (versionNum >= SUPPORTED_POSTGRES[0] * 10_000) return;
  throw new MigrationError(
    `Postgres ${version} is not supported: the outbox is tested on Postgres ${SUPPORTED_POSTGRES.slice(0, -1).join(", ")} ` +
      `and ${SUPPORTED_POSTGRES.at(-1)} (docs/database.md, Supported Postgres versions); upgrade the database first`,
  );
}

/** The migrations' one setting of their own; the database and the outbox's location have their tables. */
export const MIGRATE_SETTINGS = {
  migrationsDir: textSetting({
    env: "OUTBOX_MIGRATIONS_DIR",
    default: undefined,
    doc: "folder of NNNN_name.sql files; unset: the package's own migrations/",
  }),
} as const;

const FILE_NAME = /^\d{4}_[a-z0-9_]+\.sql$/;
const FIRST_MIGRATION = "0001_outbox_events.sql";
/** The migration that created the private schema; file names sort, so earlier files compare below it. */
const PRIVATE_SCHEMA_MIGRATION = "0016";

/**
 * Finds the package's migrations: OUTBOX_MIGRATIONS_DIR, else the nearest `migrations/` folder holding the first
 * migration, walking up from this file. That covers running from source, from `dist/` at any depth, and from a
 * Lambda bundle with the folder copied beside it.
 */
export function defaultMigrationsDir(): string {
  const { migrationsDir } = MIGRATE_SETTINGS;
  const configured = readText(process.env, migrationsDir);
  if (configured !== undefined) return configured;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let level = 0; level < 6; level++) {
    const candidate = join(dir, "migrations");
    if (existsSync(join(candidate, FIRST_MIGRATION))) return candidate;
    dir = dirname(dir);
  }
  throw new MigrationError(
    `migrations folder (with ${FIRST_MIGRATION}) not found above ${fileURLToPath(import.meta.url)}; set ${migrationsDir.env}`,
  );
}

/** Replaces the placeholders documented at the top of each migration with quoted identifiers. */
/**
 * `{{related:x}}` names where x is when the file runs: migrations before 0016 (which moved PRIVATE_OBJECTS into
 * the private schema, `{{private}}`) name the outbox's schema, as they did when they shipped.
 */
export function renderMigration(sql: string, names: OutboxNames, file = PRIVATE_SCHEMA_MIGRATION): string {
  const related = file < PRIVATE_SCHEMA_MIGRATION ? names.relatedBefore0016 : names.related;
  return sql.replace(/\{\{(\w+)(?::(\w+))?\}\}/g, (match, kind: string, arg: string | undefined) => {
    if (kind === "schema" && arg === undefined) return quoteIdent(names.schema);
    if (kind === "private" && arg === undefined) return quoteIdent(names.privateSchema);
    if (kind === "table" && arg === undefined) return names.qualified;
    if (kind === "related" && arg !== undefined) return related(arg);
    if (kind === "name" && arg !== undefined) return quoteIdent(names.relatedName(arg));
    throw new MigrationError(`unknown placeholder ${match}`);
  });
}

async function readMigrations(dir: string) {
  const files = (await readdir(dir)).filter((name) => name.endsWith(".sql")).sort();
  const misnamed = files.filter((name) => !FILE_NAME.test(name));
  if (misnamed.length > 0) {
    throw new MigrationError(`migration files must be named NNNN_lowercase_name.sql: ${misnamed.join(", ")}`);
  }
  return Promise.all(
    files.map(async (name) => {
      const sql = await readFile(join(dir, name), "utf8");
      return { name, sql, checksum: createHash("sha256").update(sql).digest("hex") };
    }),
  );
}

/**
 * Applies pending migrations in order, one transaction per file. Each transaction first takes a
 * transaction-scoped advisory lock keyed by the outbox's name, so two runners (two deploys, a test and the
 * CLI) serialize instead of racing, and the loser finds the file recorded and skips it. `_xact_` locks end
 * with the transaction, which keeps RDS Proxy from pinning the session.
 * A recorded file whose content changed is an error: migrations are forward-only.
 * A file whose first line is `-- migrate: no-transaction` runs outside a transaction (see applyWithoutTransaction);
 * it takes two connections from `pool` at once. Nothing here needs a session to outlive a transaction, so the
 * runner works through a transaction pooler (pgbouncer in transaction mode, RDS Proxy) as well as directly.
 */
export async function migrate(pool: SessionPool, options: MigrateOptions = {}): Promise<MigrateResult> {
  const names = outboxNames(options);
  const migrations = await readMigrations(options.migrationsDir ?? defaultMigrationsDir());
  const result: MigrateResult = { applied: [], alreadyApplied: [] };
  refuseSingleSessionPool(pool, migrations);
  const recorded = await withTransaction(pool, async (client) => {
    const { rows } = await client.query<{ num: string; text: string }>(
      "select current_setting('server_version_num') as num, current_setting('server_version') as text",
    );
    refuseUnsupportedServer(Number(rows[0]?.num), rows[0]?.text ?? "unknown");
    await refuseForeignObjects(client, names, migrations);
    return recordedChecksums(client, names);
  });

  for (const migration of migrations) {
    // Recorded files stay recorded (the ledger only grows): one read for all of them instead of a locked
    // transaction each, which an up-to-date database (every deploy, every clone of the test harness) skips.
    const checksum = recorded.get(migration.name);
    if (checksum !== undefined) {
      refuseEdited(migration, checksum);
      result.alreadyApplied.push(migration.name);
      continue;
    }
    const applied = NO_TRANSACTION.test(migration.sql)
      ? await applyWithoutTransaction(pool, names, migration)
      : await withLockRetriedTransaction(pool, migration.name, options, async (client) => {
          await client.query("select pg_advisory_xact_lock(hashtextextended($1, 0))", [lockKey(names)]);
          // Set after the advisory lock: waiting for another runner is not waiting in front of producers.
          await client.query("select set_config('lock_timeout', $1, true)", [
            `${options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS}ms`,
          ]);
          if (await isRecorded(client, names, migration)) return false;
          const rolesBefore = await roleState(client, names);
          await run(client, migration.name, renderMigration(migration.sql, names, migration.name));
          await refuseAdoptedRoles(client, names, migration.name, rolesBefore);
          await record(client, names, migration);
          return true;
        });
    (applied ? result.applied : result.alreadyApplied).push(migration.name);
  }
  // Every run, not once: a database can be cloned or restored under another name at any time after its files ran.
  const roles = await withLockRetriedTransaction(pool, "(the outbox's roles)", options, async (client) => {
    await client.query("select pg_advisory_xact_lock(hashtextextended($1, 0))", [lockKey(names)]);
    await client.query("select set_config('lock_timeout', $1, true)", [
      `${options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS}ms`,
    ]);
    return ownRoles(client, names);
  });
  if (roles.length > 0) result.roles = roles;
  return result;
}

/**
 * A no-transaction file holds its lock on one session while it builds on another (applyWithoutTransaction): with
 * a pool of one session the second `connect()` would wait forever, so such a pool is refused before anything runs.
 */
function refuseSingleSessionPool(pool: SessionPool, migrations: Migration[]) {
  const max = pool.options?.max;
  const needsTwo = migrations.find((migration) => NO_TRANSACTION.test(migration.sql));
  if (max === undefined || max >= 2 || needsTwo === undefined) return;
  throw new MigrationError(
    `migrate needs a pool of at least 2 sessions, and this one has max: ${max}: ${needsTwo.name} builds an ` +
      "index concurrently on one session while another holds the runners' lock. Pass a pool with max >= 2",
  );
}

/**
 * One file's transaction, tried again while it fails on `lock_timeout` (SQLSTATE 55P03), then failed with an
 * error that names the file, the cause and how to find the blocker. Other errors fail at once.
 */
async function withLockRetriedTransaction<T>(
  pool: SessionPool,
  name: string,
  options: MigrateOptions,
  body: (client: SessionClient) => Promise<T>,
): Promise<T> {
  const lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;
  const attempts = options.lockAttempts ?? DEFAULT_LOCK_ATTEMPTS;
  let pauseMs = options.lockRetryPauseMs ?? DEFAULT_LOCK_RETRY_PAUSE_MS;
  const started = Date.now();
  for (let tried = 1; ; tried++) {
    try {
      return await withTransaction(pool, body);
    } catch (error) {
      if (!isLockNotAvailable(error)) throw error;
      if (tried >= attempts) {
        throw new MigrationError(
          `migration ${name} could not take its locks: lock_timeout (${lockTimeoutMs} ms) expired in each of ` +
            `${attempts} attempts over ${Math.round((Date.now() - started) / 1000)} s. A session holds a ` +
            "conflicting lock, most likely a long transaction on the outbox table: find it in pg_stat_activity " +
            "(pg_locks where not granted, pg_blocking_pids), end it, and run the migrations again",
          { cause: error },
        );
      }
      await sleep(pauseMs);
      pauseMs = Math.min(pauseMs * 2, MAX_LOCK_RETRY_PAUSE_MS);
    }
  }
}

type Migration = Awaited<ReturnType<typeof readMigrations>>[number];

const NO_TRANSACTION = /^--\s*migrate:\s*no-transaction\s*$/m;
/** `create [unique] index concurrently if not exists "name"`, possibly after comment lines. */
const CREATE_INDEX_CONCURRENTLY =
  /^(?:\s*--[^\n]*\n)*\s*create\s+(?:unique\s+)?index\s+concurrently\s+(if\s+not\s+exists\s+)?("(?:[^"]|"")+")?/i;

const lockKey = (names: OutboxNames) => `outbox-migrate:${names.qualified}`;
const noTransactionLockKey = (names: OutboxNames) => `outbox-migrate-no-transaction:${names.qualified}`;
const LOCK_POLL_MS = 250;

/**
 * Every name the migrations give an object of this outbox (the table, `{{related:x}}`, `{{name:x}}`, the ledger):
 * what a role that may create in the schema could create first, under the same name, for the runner to adopt.
 */
function ownNames(names: OutboxNames, migrations: readonly Migration[]): string[] {
  const own = new Set([names.table, names.relatedName("migrations")]);
  for (const migration of migrations) {
    for (const [, kind, arg] of migration.sql.matchAll(/\{\{(related|name):(\w+)\}\}/g)) {
      if (kind !== undefined && arg !== undefined) own.add(names.relatedName(arg));
    }
  }
  return [...own];
}

/**
 * The runner adopts nothing it did not create (issue 39, finding 4). A relation, function or type of the
 * outbox's schema under one of the migrations' names must belong to the role running them, or to a superuser:
 * a role with CREATE on the schema (every role on PG 14's `public`) could otherwise create the ledger first and
 * mark files applied that never ran, or a table under an index's name that `create index if not exists` then
 * skips. Postgres names an object's owner, and only its owner (or a superuser) may alter or drop it: that is
 * what makes an object the migrations'. Checked before anything is applied; the error names the object and who
 * owns it.
 */
async function refuseForeignObjects(
  client: Queryable,
  names: OutboxNames,
  migrations: readonly Migration[],
): Promise<void> {
  const { rows } = await client.query<{ kind: string; name: string; owner: string }>(
    `with own as (select unnest($2::text[]) as name),
     schema as (select oid from pg_catalog.pg_namespace where nspname = $1),
     trusted as (select oid from pg_catalog.pg_roles where rolname = current_user or rolsuper)
     select 'relation' as kind, c.relname::text as name, pg_catalog.pg_get_userbyid(c.relowner)::text as owner
     from pg_catalog.pg_class as c
     where c.relnamespace = (select oid from schema) and c.relname in (select name from own)
       and c.relowner not in (select oid from trusted)
     union all
     select 'function', p.proname::text, pg_catalog.pg_get_userbyid(p.proowner)::text
     from pg_catalog.pg_proc as p
     where p.pronamespace = (select oid from schema) and p.proname in (select name from own)
       and p.proowner not in (select oid from trusted)
     union all
     select 'type', t.typname::text, pg_catalog.pg_get_userbyid(t.typowner)::text
     from pg_catalog.pg_type as t
     where t.typnamespace = (select oid from schema) and t.typname in (select name from own)
       and t.typowner not in (select oid from trusted)
     order by 2, 1`,
    [names.schema, ownNames(names, migrations)],
  );
  if (rows.length === 0) return;
  const { rows: me } = await client.query<{ me: string }>("select current_user::text as me");
  throw new MigrationError(
    `the outbox's migrations did not create ${rows
      .map((row) => `${row.kind} ${quoteIdent(names.schema)}.${quoteIdent(row.name)} (owned by ${row.owner})`)
      .join(", ")}: they own every object under their names, and these belong to another role than the one ` +
      `running them (${me[0]?.me}) or a superuser. Nothing was applied. Find out who created ${rows.length === 1 ? "it" : "them"} and why, ` +
      "drop what is not the outbox's, and run the migrations again as the role that owns the outbox",
  );
}

interface RoleState {
  /** Every role of the cluster before the file ran. */
  roles: Set<string>;
  /** The outbox's roles recorded in `{{related:roles}}` before the file ran. */
  recorded: Set<string>;
}

/**
 * What refuseAdoptedRoles compares with. 0009 creates the outbox's roles `if not exists`: a role a CREATEROLE
 * user made first under that name (as a LOGIN, with a password of its own) would be adopted and granted the
 * relay's rights. Shipped files keep their checksums, so the runner checks what any file recorded.
 */
async function roleState(client: Queryable, names: OutboxNames): Promise<RoleState> {
  const { rows } = await client.query<{ roles: string[] }>(
    "select array(select rolname::text from pg_catalog.pg_roles) as roles",
  );
  return { roles: new Set(rows[0]?.roles), recorded: new Set(await recordedRoles(client, names)) };
}

/** The roles table where it is now: the outbox's schema before 0016 moved it to the private schema. */
async function rolesTable(client: Queryable, names: OutboxNames): Promise<string | undefined> {
  const { rows } = await client.query<{ found: boolean; moved: boolean }>(
    `select pg_catalog.to_regclass($1) is not null as moved,
            pg_catalog.to_regclass($2) is not null as found`,
    [names.related("roles"), names.relatedBefore0016("roles")],
  );
  if (rows[0]?.moved === true) return names.related("roles");
  return rows[0]?.found === true ? names.relatedBefore0016("roles") : undefined;
}

async function recordedRoles(client: Queryable, names: OutboxNames): Promise<string[]> {
  const table = await rolesTable(client, names);
  if (table === undefined) return [];
  const { rows } = await client.query<{ role_name: string }>(`select role_name from ${table}`);
  return rows.map((row) => row.role_name);
}

/** A role a file recorded as the outbox's must be one it created: one that existed before it ran is refused. */
async function refuseAdoptedRoles(client: Queryable, names: OutboxNames, file: string, before: RoleState) {
  const adopted = (await recordedRoles(client, names)).filter(
    (role) => !before.recorded.has(role) && before.roles.has(role),
  );
  if (adopted.length === 0) return;
  throw new MigrationError(
    `migration ${file} would give this outbox's rights to ${adopted.map((role) => `role ${quoteIdent(role)}`).join(", ")}, ` +
      "which existed before the migration ran: the outbox's roles are created by its migrations, never adopted " +
      "(someone with CREATEROLE may have made it first, as a login with a password of their own). Nothing was " +
      `applied. Find out who created it, drop it (drop role ${adopted.map(quoteIdent).join(", ")}), and run the migrations again`,
  );
}

/** Creates the ledger if needed; true when the file is already applied (and unchanged). */
async function isRecorded(client: Queryable, names: OutboxNames, migration: Migration): Promise<boolean> {
  const ledger = names.related("migrations");
  await client.query(`create schema if not exists ${quoteIdent(names.schema)}`);
  await client.query(
    `create table if not exists ${ledger} (
       name text primary key, checksum text not null, applied_at timestamptz not null default now())`,
  );
  const { rows } = await client.query<{ checksum: string }>(
    `select checksum from ${ledger} where name = $1`,
    [migration.name],
  );
  const recorded = rows[0];
  if (recorded === undefined) return false;
  refuseEdited(migration, recorded.checksum);
  return true;
}

function refuseEdited(migration: Migration, checksum: string) {
  if (checksum === migration.checksum) return;
  throw new MigrationError(
    `migration ${migration.name} was applied with different content (checksum ${checksum}); ` +
      "migrations are forward-only: add a new file instead of editing an applied one",
  );
}

/** The ledger's files and checksums, read before any file's transaction; empty when there is no ledger yet. */
async function recordedChecksums(client: Queryable, names: OutboxNames): Promise<Map<string, string>> {
  const ledger = names.related("migrations");
  const { rows: found } = await client.query<{ exists: boolean }>(
    "select pg_catalog.to_regclass($1) is not null as exists",
    [ledger],
  );
  if (found[0]?.exists !== true) return new Map();
  const { rows } = await client.query<{ name: string; checksum: string }>(
    `select name, checksum from ${ledger}`,
  );
  return new Map(rows.map((row) => [row.name, row.checksum]));
}

async function record(client: Queryable, names: OutboxNames, migration: Migration) {
  await client.query(`insert into ${names.related("migrations")} (name, checksum) values ($1, $2)`, [
    migration.name,
    migration.checksum,
  ]);
}

async function run(client: Queryable, name: string, sql: string) {
  try {
    await client.query(sql);
  } catch (error) {
    throw new MigrationError(`migration ${name} failed: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * For `create index concurrently` on a busy table, which Postgres refuses inside a transaction. Runners serialize
 * on a transaction-scoped advisory lock that a second session holds for the file's duration: a transaction that
 * took only that lock holds no snapshot and no table lock while it sits idle, so the concurrent build does not
 * wait for it, and it keeps its server connection behind a transaction pooler (pgbouncer in transaction mode,
 * RDS Proxy) without pinning anything. A session-level lock would not: behind pgbouncer the statements that
 * follow it run on whichever backend is free, and the lock stays behind on one that other clients then use
 * (tested in test/db/pooler.test.ts). The lock is polled with `pg_try_advisory_xact_lock`, each failed try in a
 * transaction of its own: a runner *blocked* on the lock would sit in a statement holding a snapshot, which the
 * concurrent build waits for while that runner waits for the build's lock, a deadlock. Its own key, for the same
 * reason: a runner still at an earlier file must not block on it either. The holding transaction turns off
 * idle_in_transaction_session_timeout for itself, which a parameter group may set; if its session dies anyway
 * (runner killed), the lock ends with it.
 * Statements run one by one, autocommitted: each ends with `;` at the end of a line (splitStatements), and a DO
 * block or function body keeps the `;`s of its dollar-quoted body. A concurrent build that failed half way (lock timeout, cancel, crash) leaves an INVALID index
 * under its name, which `if not exists` would then silently accept: it is dropped before the build is retried.
 * The file is recorded after its last statement, so every statement must be safe to run again. No lock_timeout:
 * a concurrent build or drop takes only SHARE UPDATE EXCLUSIVE, which never queues producers' INSERTs, and it
 * waits for older transactions to end by design; cutting that wait short would only leave an INVALID index.
 */
async function applyWithoutTransaction(
  pool: SessionPool,
  names: OutboxNames,
  migration: Migration,
): Promise<boolean> {
  const lock = await holdNoTransactionLock(pool, noTransactionLockKey(names));
  let client: SessionClient | undefined;
  const ignore = () => {};
  let broken: Error | undefined;
  try {
    client = await pool.connect();
    client.on?.("error", ignore);
    if (await isRecorded(client, names, migration)) return false;
    const statements = splitStatements(renderMigration(migration.sql, names, migration.name));
    for (const statement of statements) {
      await dropInvalidIndexBuiltBy(client, names, migration.name, statement);
      await run(client, migration.name, statement);
    }
    await record(client, names, migration);
    return true;
  } catch (error) {
    broken = error as Error;
    throw error;
  } finally {
    client?.off?.("error", ignore);
    client?.release(broken instanceof MigrationError ? undefined : broken);
    await lock.release();
  }
}

/**
 * A no-transaction file's statements: split at each `;` that ends a line, outside comments, quoted strings and
 * identifiers, and dollar-quoted bodies, so a DO block (one atomic statement, e.g. a SECURITY DEFINER function
 * created and its EXECUTE revoked together) stays whole. Blank and comment-only pieces are dropped.
 */
export function splitStatements(sql: string): string[] {
  const statements: string[] = [];
  let start = 0;
  let i = 0;
  const skipTo = (end: number, length: number) => {
    i = end === -1 ? sql.length : end + length;
  };
  while (i < sql.length) {
    const rest = sql.slice(i, i + 2);
    if (rest === "--") skipTo(sql.indexOf("\n", i), 0);
    else if (rest === "/*") skipTo(sql.indexOf("*/", i + 2), 2);
    else if (sql[i] === "'" || sql[i] === '"') skipTo(sql.indexOf(sql[i] as string, i + 1), 1);
    else if (sql[i] === "$" && !/[A-Za-z0-9_]/.test(sql[i - 1] ?? " ")) {
      const tag = /^\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i, i + 66))?.[0];
      if (tag === undefined) i++;
      else skipTo(sql.indexOf(tag, i + tag.length), tag.length);
    } else if (sql[i] === ";") {
      const end = /^;[ \t]*(?:\r?\n|$)/.exec(sql.slice(i, i + 80))?.[0];
      i += end?.length ?? 1;
      if (end !== undefined) {
        statements.push(sql.slice(start, i - end.length));
        start = i;
      }
    } else i++;
  }
  statements.push(sql.slice(start));
  return statements.filter((statement) => statement.replace(/--[^\n]*/g, "").trim() !== "");
}

/** Takes the no-transaction files' lock in a transaction of a session of its own, and keeps it open. */
async function holdNoTransactionLock(pool: SessionPool, key: string): Promise<{ release(): Promise<void> }> {
  const client = await pool.connect();
  const ignore = () => {};
  client.on?.("error", ignore);
  try {
    for (;;) {
      await client.query("begin");
      const { rows } = await client.query<{ locked: boolean }>(
        "select pg_try_advisory_xact_lock(hashtextextended($1, 0)) as locked",
        [key],
      );
      if (rows[0]?.locked === true) {
        // Parameterless, so sent with the simple protocol: it closes the unnamed portal of the statement above,
        // which otherwise keeps that statement's snapshot (backend_xmin) for as long as the transaction sits
        // idle, and the concurrent build would wait for this very transaction (seen: a hang on 17.10).
        await client.query("select set_config('idle_in_transaction_session_timeout', '0', true)");
        break;
      }
      await client.query("rollback");
      await sleep(LOCK_POLL_MS);
    }
  } catch (error) {
    client.off?.("error", ignore);
    client.release(error as Error);
    throw error;
  }
  return {
    async release() {
      let failed: Error | undefined;
      await client.query("rollback").catch((error: Error) => {
        failed = error;
      });
      client.off?.("error", ignore);
      client.release(failed);
    },
  };
}

async function dropInvalidIndexBuiltBy(
  client: Queryable,
  names: OutboxNames,
  file: string,
  statement: string,
) {
  const match = CREATE_INDEX_CONCURRENTLY.exec(statement);
  if (match === null) return;
  const quotedName = match[2];
  if (match[1] === undefined || quotedName === undefined) {
    throw new MigrationError(
      `migration ${file}: write "create index concurrently if not exists {{name:...}}" so that a retry after a ` +
        "failure can find and rebuild the index",
    );
  }
  const name = quotedName.slice(1, -1).replaceAll('""', '"');
  const { rows } = await client.query(
    `select 1 from pg_index as i
     join pg_class as c on c.oid = i.indexrelid
     join pg_namespace as n on n.oid = c.relnamespace
     where n.nspname = $1 and c.relname = $2 and not i.indisvalid`,
    [names.schema, name],
  );
  if (rows.length > 0) {
    await run(client, file, `drop index concurrently if exists ${quoteIdent(names.schema)}.${quotedName}`);
  }
}
