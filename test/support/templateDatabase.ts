import pg from "pg";
import { migrate } from "../../functions/shared/db/migrate.ts";

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** (Re)creates database `name` on the server and migrates it once; test files clone it (test/support/db.ts). */
export async function createMigratedTemplate(serverUrl: string, name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`drop database if exists ${name}`);
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const pool = new pg.Pool({ connectionString: withDatabase(serverUrl, name), max: 2 });
  try {
    await migrate(pool);
  } finally {
    await pool.end();
  }
}
