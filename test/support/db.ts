import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, afterEach, beforeAll, inject } from "vitest";
import { migrate } from "../../functions/shared/db/migrate.ts";
import { withDatabase } from "./templateDatabase.ts";

export interface TestDatabase {
  url: string;
  directUrl: string;
  pool: pg.Pool;
}

/**
 * A database of this test file's own, cloned from the migrated template, so files run in parallel without
 * seeing each other's rows. Call at the top level of a test file; use the result inside tests. `url` and `pool`
 * reach it the way the harness says (directly, or through pgbouncer with OUTBOX_TEST_POOLER=pgbouncer);
 * `directUrl` always reaches the server itself, for what needs a session of its own.
 */
export function useTestDatabase(): TestDatabase {
  const name = `outbox_test_${randomBytes(6).toString("hex")}`;
  const state = {} as TestDatabase;
  beforeAll(async () => {
    const admin = new pg.Client({ connectionString: inject("pgUrl") });
    await admin.connect();
    await admin.query(`create database ${name} template ${inject("templateDatabase")}`);
    await admin.end();
    await migrateClone(withDatabase(inject("pgUrl"), name));
    state.url = withDatabase(inject("pgAppServerUrl"), name);
    state.directUrl = withDatabase(inject("pgUrl"), name);
    state.pool = new pg.Pool({ connectionString: state.url, max: 10 });
    // Tests terminate sessions on purpose; an idle client's error must not crash the worker.
    state.pool.on("error", () => {});
    state.pool.on("connect", (client) => client.on("error", () => {}));
  });
  afterAll(async () => {
    await state.pool?.end();
    const admin = new pg.Client({ connectionString: inject("pgUrl") });
    await admin.connect();
    await dropDatabaseAndItsRoles(admin, name);
    await admin.end();
  });
  return state;
}

/**
 * What a user must do after `create database ... template` (docs/database.md, "Cloned and restored databases"):
 * run the migrations, which give the clone relay and purge roles of its own instead of the template's. Without
 * it every test database would share the template's roles, and the relay and the purge refuse such a database.
 */
async function migrateClone(url: string) {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  try {
    await migrate(pool);
  } finally {
    await pool.end();
  }
}

/**
 * Roles belong to the cluster and outlive the database: the outbox roles the migrations made for this database
 * (0009's, and the ones the runner gave the clone) go with it, so a long-lived test server does not collect them.
 * They are the `outbox_` roles its objects name (pg_shdepend); once it is dropped, those no other database names
 * (the template's roles stay) are dropped.
 */
async function dropDatabaseAndItsRoles(admin: pg.Client, database: string) {
  const { rows } = await admin.query<{ oid: string }>(
    `select distinct s.refobjid::text as oid from pg_shdepend as s
     join pg_database as d on d.oid = s.dbid and d.datname = $1
     join pg_roles as r on r.oid = s.refobjid and r.rolname like 'outbox\\_%:%'
     where s.refclassid = 'pg_authid'::regclass`,
    [database],
  );
  await admin.query(`drop database if exists ${database} with (force)`);
  const { rows: unused } = await admin.query<{ name: string }>(
    `select quote_ident(r.rolname) as name from pg_roles as r
     where r.oid = any($1::oid[]) and not exists (select from pg_shdepend as s where s.refobjid = r.oid)`,
    [rows.map((row) => row.oid)],
  );
  for (const { name } of unused) await admin.query(`drop role if exists ${name}`);
}

/** An empty database (no migrations) for tests of the migration runner itself. */
export function createEmptyDatabase(): Promise<ScratchDatabase> {
  return createDatabase(`outbox_empty_${randomBytes(6).toString("hex")}`, "");
}

/**
 * `create database <new> template <template>`, as an operator would clone one, and nothing else: no migrations
 * run on the clone (the template must have no sessions open).
 */
export function cloneDatabase(template: string, owner?: string): Promise<ScratchDatabase> {
  const options = ` template ${template}${owner === undefined ? "" : ` owner ${owner}`}`;
  return createDatabase(`outbox_clone_${randomBytes(6).toString("hex")}`, options);
}

export interface ScratchDatabase {
  name: string;
  /** The server itself, as the harness's superuser. */
  url: string;
  drop(): Promise<void>;
}

async function createDatabase(name: string, template: string): Promise<ScratchDatabase> {
  const admin = new pg.Client({ connectionString: inject("pgUrl") });
  await admin.connect();
  await admin.query(`create database ${name}${template}`);
  await admin.end();
  return {
    name,
    url: withDatabase(inject("pgUrl"), name),
    async drop() {
      const client = new pg.Client({ connectionString: inject("pgUrl") });
      await client.connect();
      await dropDatabaseAndItsRoles(client, name);
      await client.end();
    },
  };
}

/**
 * For tests that need a database with nothing in it (migrations): `emptyPool()` creates one per call, and the
 * pools and databases are dropped after each test; `cleanUpFirst` runs a step before those (ending a session
 * that would hold up the drop).
 */
export function useEmptyDatabases(): {
  emptyPool(): Promise<pg.Pool>;
  cleanUpFirst(cleanup: () => Promise<void>): void;
} {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });
  return {
    async emptyPool() {
      const database = await createEmptyDatabase();
      const pool = new pg.Pool({ connectionString: database.url, max: 4 });
      pool.on("error", () => {}); // `drop database ... with (force)` may end a session pool.end() is still closing
      cleanups.push(async () => {
        await pool.end();
        await database.drop();
      });
      return pool;
    },
    cleanUpFirst(cleanup) {
      cleanups.unshift(cleanup);
    },
  };
}
