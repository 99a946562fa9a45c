/**
 * `outbox dev`'s database: `--database-url` / DATABASE_URL when given, else the embedded Postgres
 * (embeddedPostgres.ts), else an error naming both. Either way it answers before anything else starts, and the
 * package's migration runner brings it up to date: the outbox's migrations, and the inbox's when a consumer runs.
 */
import { migrateInbox } from "../../functions/shared/consumer/inboxTable.ts";
import { databaseSourceFromEnv } from "../../functions/shared/db/connection.ts";
import { migrate } from "../../functions/shared/db/migrate.ts";
import type { OutboxLocation } from "../../functions/shared/outbox/names.ts";
import type { Env } from "../../functions/shared/util/env.ts";
import { MIGRATE_QUERY_TIMEOUT_MS, type OutboxDatabase, openOutboxDatabase } from "../database.ts";
import { startEmbeddedPostgres } from "./embeddedPostgres.ts";

export interface DevDatabase {
  url: string;
  /** "DATABASE_URL" / "--database-url", or "embedded Postgres (.outbox/postgres)". */
  source: string;
  database: OutboxDatabase;
  /** Migrations applied by this start (none when the database was up to date). */
  applied: string[];
  stop(): Promise<void>;
}

export interface DevDatabaseOptions {
  databaseUrl: string | undefined;
  /** Where `.outbox/` is (the project's folder). */
  dir: string;
  databasePort: number;
  reset: boolean;
  location: OutboxLocation;
  inbox: boolean;
  /** DATABASE_CA_FILE / DATABASE_SSLMODE, as the Lambdas read them. */
  env: Env;
  log(line: string): void;
}

export async function openDevDatabase(options: DevDatabaseOptions): Promise<DevDatabase> {
  const embedded =
    options.databaseUrl === undefined
      ? await startEmbeddedPostgres({
          dir: options.dir,
          port: options.databasePort,
          reset: options.reset,
          log: options.log,
        })
      : undefined;
  const url = embedded?.url ?? withoutLocalTls(options.databaseUrl as string);
  try {
    const database = await openOutboxDatabase(
      {
        source: databaseSourceFromEnv({ ...options.env, DATABASE_URL: url, DATABASE_SECRET_ARN: undefined }),
        location: options.location,
      },
      { requireTable: false, maxConnections: 2, queryTimeoutMs: MIGRATE_QUERY_TIMEOUT_MS },
    );
    try {
      const outbox = await migrate(database.pool, options.location);
      const inbox = options.inbox ? await migrateInbox(database.pool) : { applied: [] };
      return {
        url,
        source: embedded === undefined ? "DATABASE_URL" : "embedded Postgres (.outbox/postgres)",
        database,
        applied: [...outbox.applied, ...inbox.applied],
        stop: async () => {
          await database.close().catch(() => {});
          await embedded?.stop();
        },
      };
    } catch (error) {
      await database.close().catch(() => {});
      throw error;
    }
  } catch (error) {
    await embedded?.stop().catch(() => {});
    throw error;
  }
}

/**
 * A server on this machine rarely has TLS, and a URL without `sslmode` is verified against the RDS CA bundle
 * (functions/shared/db/connection.ts): for a loopback host without a TLS parameter, `sslmode=disable` is added.
 */
export function withoutLocalTls(databaseUrl: string): string {
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    return databaseUrl; // the connection reader names the problem
  }
  const loopback = ["localhost", "127.0.0.1", "[::1]"].includes(url.hostname);
  const chosen = ["sslmode", "sslrootcert", "ssl"].some((name) => url.searchParams.has(name));
  if (loopback && !chosen) url.searchParams.set("sslmode", "disable");
  return url.toString();
}
