// "aws-outbox-relay/db": how the relay, the purge and consumers reach Postgres — a pool from a URL or a Secrets
// Manager secret (TLS, rotation followed), and the seam types the library's functions take.
export {
  createDatabasePool,
  type DatabasePool,
  type DatabaseSource,
  databaseSourceFromEnv,
} from "./connection.ts";
export type { Queryable, SessionClient, SessionPool } from "./session.ts";
