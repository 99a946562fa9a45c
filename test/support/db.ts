import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, afterEach, beforeAll, inject } from "vitest";
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
    await admin.query(`drop database if exists ${name} with (force)`);
    await dropOutboxRolesOf(admin, name);
    await admin.end();
  });
  return state;
}

/**
 * Roles belong to the cluster and outlive the database: the ones migration 0009 created for an outbox of this
 * database (named `outbox_<job>:<database>.<schema>.<table>`) go with it, so a long-lived test server does not
 * collect them. Once the database is dropped nothing depends on them.
 */
async function dropOutboxRolesOf(admin: pg.Client, database: string) {
  const { rows } = await admin.query<{ name: string }>(
    "select quote_ident(rolname) as name from pg_roles where rolname like 'outbox\\_%:' || $1 || '.%'",
    [database],
  );
  for (const { name } of rows) await admin.query(`drop role if exists ${name}`);
}

/** An empty database (no migrations) for tests of the migration runner itself. */
export async function createEmptyDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `outbox_empty_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: inject("pgUrl") });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  return {
    url: withDatabase(inject("pgUrl"), name),
    async drop() {
      const client = new pg.Client({ connectionString: inject("pgUrl") });
      await client.connect();
      await client.query(`drop database if exists ${name} with (force)`);
      await dropOutboxRolesOf(client, name);
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
