import {
  createDatabasePool,
  type DatabasePool,
  type DatabaseSource,
  databaseSourceFromEnv,
} from "../functions/shared/db/connection.ts";
import { outboxMigrateHint } from "../functions/shared/db/notMigrated.ts";
import { isClientTimeout, type SessionClient } from "../functions/shared/db/session.ts";
import {
  OUTBOX_LOCATION_SETTINGS,
  type OutboxLocation,
  type OutboxNames,
  outboxLocationFromEnv,
  outboxNames,
} from "../functions/shared/outbox/names.ts";
import type { Env } from "../functions/shared/util/env.ts";
import { CliError, describeError, EXIT_FAILURE } from "./errors.ts";

export interface OutboxDatabase {
  pool: DatabasePool;
  names: OutboxNames;
  source: DatabaseSource;
  /** Runs `work` on one pooled session and returns it to the pool. */
  withSession<T>(work: (client: SessionClient) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** Which database, and where in it the outbox lives. */
export interface OutboxTarget {
  source: DatabaseSource;
  location: OutboxLocation;
}

/** DATABASE_URL or DATABASE_SECRET_ARN (+ DATABASE_*), OUTBOX_SCHEMA, OUTBOX_TABLE: as the Lambdas read them. */
export function outboxTargetFromEnv(env: Env): OutboxTarget {
  const location = outboxLocationFromEnv(env);
  outboxNames(location); // validate names before connecting
  return { source: databaseSourceFromEnv(env), location };
}

/**
 * Client-side bound on each query of the operator commands (status, dead-letters, redrive): a table lock held by
 * a migration, a lost network path or a stuck server must end the command with an error, not hang a terminal or
 * a cron job. Migrations build indexes on large tables and get longer (MIGRATE_QUERY_TIMEOUT_MS); both can be
 * changed with --query-timeout-ms.
 */
export const CLI_QUERY_TIMEOUT_MS = 30_000;
export const MIGRATE_QUERY_TIMEOUT_MS = 900_000;

export interface OpenOptions {
  /** Connections at most (the relay needs one per concurrent round, plus one for LISTEN). */
  maxConnections?: number;
  /** Client-side bound on each query (see PoolOptions.queryTimeoutMs); CLI_QUERY_TIMEOUT_MS by default. */
  queryTimeoutMs?: number;
  /** Fail with "run outbox migrate" when the outbox table does not exist yet. */
  requireTable?: boolean;
}

/**
 * Opens a small pool and checks it right away, so an unreachable database or a missing table is reported
 * before any work starts, in words.
 */
export async function openOutboxDatabase(
  { source, location }: OutboxTarget,
  options: OpenOptions = {},
): Promise<OutboxDatabase> {
  const names = outboxNames(location);
  const databaseUrl = source.kind === "url" ? source.url : undefined;
  let pool: DatabasePool;
  try {
    pool = await createDatabasePool(source, {
      max: options.maxConnections ?? 2,
      applicationName: "outbox-cli",
      queryTimeoutMs: options.queryTimeoutMs ?? CLI_QUERY_TIMEOUT_MS,
    });
  } catch (error) {
    throw describeError(error, { databaseUrl });
  }
  const withSession = async <T>(work: (client: SessionClient) => Promise<T>): Promise<T> => {
    let client: SessionClient;
    try {
      client = await pool.connect();
    } catch (error) {
      throw describeError(error, { databaseUrl });
    }
    try {
      const result = await work(client);
      client.release();
      return result;
    } catch (error) {
      // A session that failed mid-command may be broken (timed out, connection lost): never reuse it.
      client.release(error as Error);
      if (isClientTimeout(error)) {
        throw new CliError(
          `the database did not answer within ${options.queryTimeoutMs ?? CLI_QUERY_TIMEOUT_MS} ms ` +
            "(--query-timeout-ms): a lock held by another session, or the server unreachable",
          EXIT_FAILURE,
          { cause: error },
        );
      }
      throw error;
    }
  };
  const database: OutboxDatabase = { pool, names, source, withSession, close: () => pool.end() };
  try {
    // Connecting now (even for `migrate`) turns an unreachable database into one clear line up front.
    const exists = await outboxTableExists(database);
    if ((options.requireTable ?? true) && !exists) throw missingTable(database.names);
  } catch (error) {
    await pool.end();
    throw error;
  }
  return database;
}

async function outboxTableExists(database: OutboxDatabase): Promise<boolean> {
  return database.withSession(async (client) => {
    const { rows } = await client.query<{ exists: boolean }>("select to_regclass($1) is not null as exists", [
      database.names.qualified,
    ]);
    return rows[0]?.exists === true;
  });
}

function missingTable(names: OutboxNames): CliError {
  const where = `${OUTBOX_LOCATION_SETTINGS.schema.env} / ${OUTBOX_LOCATION_SETTINGS.table.env}, --schema / --table`;
  return new CliError(outboxMigrateHint(names, where).missing, EXIT_FAILURE);
}
