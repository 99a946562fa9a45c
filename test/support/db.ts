import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, inject } from "vitest";
import { withDatabase } from "./templateDatabase.ts";

export interface TestDatabase {
  url: string;
  pool: pg.Pool;
}

/**
 * A database of this test file's own, cloned from the migrated template, so files run in parallel without
 * seeing each other's rows. Call at the top level of a test file; use the result inside tests.
 */
export function useTestDatabase(): TestDatabase {
  const name = `outbox_test_${randomBytes(6).toString("hex")}`;
  const state = {} as TestDatabase;
  beforeAll(async () => {
    const admin = new pg.Client({ connectionString: inject("pgUrl") });
    await admin.connect();
    await admin.query(`create database ${name} template ${inject("templateDatabase")}`);
    await admin.end();
    state.url = withDatabase(inject("pgUrl"), name);
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
    await admin.end();
  });
  return state;
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
      await client.end();
    },
  };
}
