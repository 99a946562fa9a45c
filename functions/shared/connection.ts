import { readFileSync } from "node:fs";
import { GetSecretValueCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import pg from "pg";
import type { SessionClient, SessionPool } from "./db.ts";
import { integer, oneOf, optionalString } from "./env.ts";
import { ConfigError } from "./errors.ts";

/**
 * Where the database credentials come from: a URL (local runs, tests, CLI; TLS as its own `sslmode` says), or
 * a Secrets Manager secret in the RDS format (deployed Lambdas; TLS verified against Amazon's RDS CAs).
 */
export type DatabaseSource =
  | { kind: "url"; url: string }
  | {
      kind: "secret";
      secretArn: string;
      database?: string;
      tls: "verify-full" | "disable";
      caFile: string;
      ttlMs: number;
    };

/**
 * The Lambda Node.js runtimes (20 and later) ship every Amazon root CA, RDS's included, in this file but no
 * longer load it at start (it slowed cold starts). We read it for the database connection only.
 */
export const LAMBDA_CA_BUNDLE = "/var/runtime/ca-cert.pem";

type Env = Record<string, string | undefined>;

export function databaseSourceFromEnv(env: Env): DatabaseSource {
  const url = optionalString(env, "DATABASE_URL");
  const secretArn = optionalString(env, "DATABASE_SECRET_ARN");
  if (url !== undefined && secretArn !== undefined) {
    throw new ConfigError("set either DATABASE_URL or DATABASE_SECRET_ARN, not both");
  }
  if (url !== undefined) {
    if (!/^postgres(ql)?:\/\//.test(url))
      throw new ConfigError("DATABASE_URL must start with postgres:// or postgresql://");
    return { kind: "url", url };
  }
  if (secretArn !== undefined) {
    if (!secretArn.startsWith("arn:"))
      throw new ConfigError("DATABASE_SECRET_ARN must be a Secrets Manager secret ARN");
    const database = optionalString(env, "DATABASE_NAME");
    return {
      kind: "secret",
      secretArn,
      ...(database === undefined ? {} : { database }),
      // `disable` exists for local servers without TLS; never for a database reached over a network.
      tls: oneOf(env, "DATABASE_SSLMODE", ["verify-full", "disable"], "verify-full"),
      caFile: optionalString(env, "DATABASE_CA_FILE") ?? LAMBDA_CA_BUNDLE,
      ttlMs: integer(env, "DATABASE_SECRET_TTL_SECONDS", 900, 0, 86_400) * 1000,
    };
  }
  throw new ConfigError("set DATABASE_URL (postgres://user:password@host:5432/db) or DATABASE_SECRET_ARN");
}

interface RdsSecret {
  username: string;
  password: string;
  host: string;
  port?: number | string;
  dbname?: string;
}

/** Caches the secret for `ttlMs`; `refresh()` forces a fetch (after an authentication failure: rotation). */
export class SecretCache {
  #value?: Promise<RdsSecret>;
  #fetchedAt = 0;
  readonly #client: SecretsManagerClient;
  readonly #secretArn: string;
  readonly #ttlMs: number;
  constructor(client: SecretsManagerClient, secretArn: string, ttlMs: number) {
    this.#client = client;
    this.#secretArn = secretArn;
    this.#ttlMs = ttlMs;
  }

  get(): Promise<RdsSecret> {
    if (this.#value === undefined || Date.now() - this.#fetchedAt > this.#ttlMs) return this.refresh();
    return this.#value;
  }

  refresh(): Promise<RdsSecret> {
    this.#fetchedAt = Date.now();
    this.#value = this.#fetch();
    this.#value.catch(() => {
      this.#value = undefined; // never cache a failure
    });
    return this.#value;
  }

  async #fetch(): Promise<RdsSecret> {
    const { SecretString } = await this.#client.send(
      new GetSecretValueCommand({ SecretId: this.#secretArn }),
    );
    let secret: Partial<RdsSecret>;
    try {
      secret = JSON.parse(SecretString ?? "");
    } catch {
      throw new ConfigError(`secret ${this.#secretArn} is not JSON (expected the RDS secret format)`);
    }
    for (const field of ["username", "password", "host"] as const) {
      if (typeof secret[field] !== "string" || secret[field] === "") {
        throw new ConfigError(`secret ${this.#secretArn} has no "${field}" (expected the RDS secret format)`);
      }
    }
    return secret as RdsSecret;
  }
}

export interface DatabasePool extends SessionPool {
  end(): Promise<void>;
}

export interface PoolOptions {
  /** Connections at most; a relay needs one per concurrent round (plus one for LISTEN). */
  max: number;
  applicationName: string;
  secrets?: SecretsManagerClient;
  onError?: (error: Error) => void;
}

const AUTH_FAILED = new Set(["28P01", "28000"]);

/**
 * One small pool per process (per Lambda container), reused across invocations. A connection that died while
 * the container was frozen surfaces as an 'error' on the idle client (handled, so it cannot crash the process)
 * or as a failed query, after which withTransaction destroys it and the next checkout opens a fresh one.
 */
export async function createDatabasePool(
  source: DatabaseSource,
  options: PoolOptions,
): Promise<DatabasePool> {
  const common: pg.PoolConfig = {
    max: options.max,
    application_name: options.applicationName,
    keepAlive: true,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 60_000,
  };
  if (source.kind === "url") {
    const pool = new pg.Pool({ ...common, connectionString: source.url });
    handleConnectionErrors(pool, options.onError);
    return pool as unknown as DatabasePool;
  }

  const ssl =
    source.tls === "disable" ? false : { ca: readCaBundle(source.caFile), rejectUnauthorized: true };
  const secrets = new SecretCache(
    options.secrets ?? new SecretsManagerClient({}),
    source.secretArn,
    source.ttlMs,
  );
  const secret = await secrets.get();
  const pool = new pg.Pool({
    ...common,
    host: secret.host,
    port: Number(secret.port ?? 5432),
    user: secret.username,
    database: source.database ?? secret.dbname ?? "postgres",
    // Read for every new connection, so a rotated password is picked up without a restart.
    password: async () => (await secrets.get()).password,
    ssl,
  });
  handleConnectionErrors(pool, options.onError);
  return {
    async connect(): Promise<SessionClient> {
      try {
        return await pool.connect();
      } catch (error) {
        if (!AUTH_FAILED.has((error as { code?: string }).code ?? "")) throw error;
        await secrets.refresh(); // rotated since we cached it: fetch and try once more
        return pool.connect();
      }
    },
    end: () => pool.end(),
  };
}

function readCaBundle(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (error) {
    throw new ConfigError(`cannot read the database CA bundle ${file}; set DATABASE_CA_FILE`, {
      cause: error,
    });
  }
}

/**
 * A server-ended session (failover, idle timeout, pg_terminate_backend) emits a protocol error and then, often,
 * a socket ECONNRESET. The pool hears the first only while the client is idle in it; the second would arrive
 * with nobody listening and crash the process. Every client gets a listener for its whole life.
 */
function handleConnectionErrors(pool: pg.Pool, onError: ((error: Error) => void) | undefined) {
  const report = (error: Error) => onError?.(error);
  pool.on("error", report);
  pool.on("connect", (client) => client.on("error", report));
}
