import { readFileSync } from "node:fs";
// Types only: the client is loaded when a secret is read (secretsManager()), so a pool from a URL loads no SDK.
import type { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import pg from "pg";
import { ConfigError } from "../outbox/errors.ts";
import { awsHttpOptions, endpointFor, explainUnreachable } from "../util/awsClient.ts";
import { backoffDelayMs } from "../util/backoff.ts";
import type { Env } from "../util/env.ts";
import { readChoice, readInteger, readText } from "../util/settings.ts";
import { sleep } from "../util/sleep.ts";
import type { Queryable, SessionClient, SessionPool } from "./session.ts";
import { DATABASE_SETTINGS, LAMBDA_CA_BUNDLE } from "./settings.ts";
import { isAuthenticationFailure } from "./sqlstate.ts";

export { LAMBDA_CA_BUNDLE };

/**
 * Where the database credentials come from: a URL (local runs, tests, CLI), or a Secrets Manager secret in the
 * RDS format (deployed Lambdas). Both verify TLS against the Amazon RDS CA bundle unless told otherwise: a URL by
 * its own `sslmode=disable|no-verify`, `sslrootcert=<file>` or `ssl=` parameter (then `tls: "from-url"` and pg
 * reads them), a secret by DATABASE_SSLMODE=disable.
 */
export type DatabaseSource =
  | { kind: "url"; url: string; tls: "verify-full" | "from-url"; caFile: string }
  | {
      kind: "secret";
      secretArn: string;
      database?: string;
      tls: "verify-full" | "disable";
      caFile: string;
      ttlMs: number;
    };

export function databaseSourceFromEnv(env: Env): DatabaseSource {
  const s = DATABASE_SETTINGS;
  const url = readText(env, s.url);
  const secretArn = readText(env, s.secretArn);
  if (url !== undefined && secretArn !== undefined) {
    throw new ConfigError(`set either ${s.url.env} or ${s.secretArn.env}, not both`);
  }
  if (url !== undefined) {
    if (!/^postgres(ql)?:\/\//.test(url))
      throw new ConfigError(`${s.url.env} must start with postgres:// or postgresql://`);
    return {
      kind: "url",
      url,
      tls: urlSaysTls(url) ? "from-url" : "verify-full",
      caFile: readText(env, s.caFile),
    };
  }
  if (secretArn !== undefined) {
    if (!secretArn.startsWith("arn:"))
      throw new ConfigError(`${s.secretArn.env} must be a Secrets Manager secret ARN`);
    const database = readText(env, s.name);
    return {
      kind: "secret",
      secretArn,
      ...(database === undefined ? {} : { database }),
      // `disable` exists for local servers without TLS; never for a database reached over a network.
      tls: readChoice(env, s.sslmode),
      caFile: readText(env, s.caFile),
      ttlMs: readInteger(env, s.secretTtlSeconds) * 1000,
    };
  }
  throw new ConfigError(`set ${s.url.env} (postgres://user:password@host:5432/db) or ${s.secretArn.env}`);
}

/**
 * The URL parameters by which a URL chooses its own TLS. pg reads `sslmode=require` (and prefer, verify-ca) as
 * verify-full against Node's CAs, which lack the RDS CA: those, like no sslmode at all, get verify-full against
 * the RDS bundle instead, so the safe setting is also the one that works.
 */
function urlSaysTls(url: string): boolean {
  let params: URLSearchParams;
  try {
    params = new URL(url).searchParams;
  } catch {
    throw new ConfigError(
      "DATABASE_URL is not a valid URL (percent-encode special characters in the password)",
    );
  }
  const sslmode = params.get("sslmode");
  return sslmode === "disable" || sslmode === "no-verify" || params.has("sslrootcert") || params.has("ssl");
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
    let SecretString: string | undefined;
    try {
      const { GetSecretValueCommand } = await secretsManager();
      ({ SecretString } = await this.#client.send(new GetSecretValueCommand({ SecretId: this.#secretArn })));
    } catch (error) {
      // No route to Secrets Manager (no NAT, no endpoint) fails in seconds (secretsManagerClient's bounds) and
      // says so, instead of hanging the invocation until its timeout.
      throw explainUnreachable(
        error,
        "secretsmanager",
        endpointFor("secretsmanager", "SECRETS_MANAGER", this.#secretArn.split(":")[3]),
      );
    }
    // A secret that holds a connection URL (how many services keep their DATABASE_URL) instead of the RDS JSON.
    if (/^postgres(ql)?:\/\//.test(SecretString ?? ""))
      return rdsSecretFromUrl(SecretString ?? "", this.#secretArn);
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

/**
 * The RDS fields of a `postgres://user:password@host:port/dbname` secret. Its query parameters (sslmode) are not
 * read: TLS is DATABASE_SSLMODE's, as for an RDS-format secret. Errors never quote the value: it holds a password.
 */
function rdsSecretFromUrl(value: string, secretArn: string): RdsSecret {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(
      `secret ${secretArn} holds a postgres:// URL that does not parse (percent-encode special characters in the password)`,
    );
  }
  const secret = {
    username: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
    host: url.hostname,
    port: url.port === "" ? 5432 : Number(url.port),
    ...(url.pathname.length > 1 ? { dbname: decodeURIComponent(url.pathname.slice(1)) } : {}),
  };
  for (const field of ["username", "password", "host"] as const) {
    if (secret[field] === "") {
      throw new ConfigError(`secret ${secretArn} holds a postgres:// URL without a ${field}`);
    }
  }
  return secret;
}

export interface DatabasePool extends SessionPool {
  end(): Promise<void>;
}

export interface PoolOptions {
  /** Connections at most; a relay needs one per concurrent round (plus one for LISTEN). */
  max: number;
  applicationName: string;
  /**
   * Client-side bound on every query, COMMIT and ROLLBACK included: a connection whose network path died
   * silently (failover, lost route, NAT timeout) would otherwise wait for TCP to give up, ~15 minutes on Linux,
   * because the server-side timeouts never reach a client that hears nothing. Set it a little above the
   * server's statement_timeout so the server's own, clearer error normally wins. Undefined: no bound (migrations,
   * whose DDL may run long).
   */
  queryTimeoutMs?: number;
  secrets?: SecretsManagerClient;
  onError?: (error: Error) => void;
  /**
   * How long a checkout keeps retrying authentication failures (28P01, 28000), re-reading the secret before each
   * try, with backoff: a rotation's window between setting the new password and making it current. Default
   * AUTH_RETRY_MS (about a minute).
   */
  authRetryMs?: number;
  /**
   * The caller's deadline (epoch ms), read at each checkout: the current invocation's end. Authentication retries
   * stop before it, whatever authRetryMs allows. Undefined or returning undefined: authRetryMs alone.
   */
  deadline?: () => number | undefined;
}

/**
 * A single-user rotation sets the new password in the database (setSecret) and only then makes it the secret's
 * current value (finishSecret); a connection in between fails with 28P01. The rotation Lambda's steps take seconds;
 * a minute of retries rides out a slow one and still fails an invocation long before anyone would wait for it.
 */
export const AUTH_RETRY_MS = 60_000;
/** The first retry's delay and the longest; equal jitter (util/backoff.ts). */
export const AUTH_RETRY_BASE_MS = 500;
export const AUTH_RETRY_CAP_MS = 8_000;

/**
 * Bounds of the Secrets Manager client the pool creates: a connect and a request timeout (the SDK has neither by
 * default) and two attempts, so an unreachable endpoint fails within ~10 s, inside Lambda's 10 s init phase
 * budget for the first try and far inside every invocation's timeout.
 */
export const SECRETS_REQUEST_TIMEOUT_MS = 3_000;

/**
 * The Secrets Manager SDK, loaded on first use: importing it took 309 ms of `/db`'s import (issue 38), which a pool
 * from a URL never needs (test/package/package.test.ts pins which clients each entry point loads).
 */
let sdk: Promise<typeof import("./secretsManagerSdk.ts")> | undefined;
function secretsManager() {
  sdk ??= import("./secretsManagerSdk.ts");
  return sdk;
}

/** The Secrets Manager client the pools use when given none: bounded (see SECRETS_REQUEST_TIMEOUT_MS). */
export async function secretsManagerClient(): Promise<SecretsManagerClient> {
  const { SecretsManagerClient } = await secretsManager();
  return new SecretsManagerClient({
    maxAttempts: 2,
    requestHandler: awsHttpOptions({ requestTimeoutMs: SECRETS_REQUEST_TIMEOUT_MS, sockets: 4 }),
  });
}

/**
 * The client-side query timeout for sessions whose statements the server bounds by `statementTimeoutMs`: a
 * second more, so a slow statement fails with the server's own error (57014) and only a silent connection
 * reaches this one.
 */
export function queryTimeoutFor(statementTimeoutMs: number): number {
  return statementTimeoutMs + 1_000;
}

/** Connecting (TCP, TLS, authentication) must finish within this, or the checkout fails. */
export const CONNECT_TIMEOUT_MS = 5_000;

/**
 * TCP keepalive probes start after this much silence on an idle pooled connection, so one that died while the
 * container was frozen is noticed before it is checked out (the OS default is two hours).
 */
export const KEEPALIVE_INITIAL_DELAY_MS = 10_000;

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
    keepAliveInitialDelayMillis: KEEPALIVE_INITIAL_DELAY_MS,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    idleTimeoutMillis: 60_000,
    ...(options.queryTimeoutMs === undefined ? {} : { query_timeout: options.queryTimeoutMs }),
  };
  if (source.kind === "url") {
    const pool = new pg.Pool({ ...common, ...urlConnection(source) });
    handleConnectionErrors(pool, options.onError);
    return {
      connect: () => pool.connect().catch((error: unknown) => Promise.reject(explainTlsError(error, source))),
      end: () => pool.end(),
    };
  }
  return SecretPool.open(source, common, options);
}

function urlConnection(source: DatabaseSource & { kind: "url" }): pg.PoolConfig {
  if (source.tls === "from-url") return { connectionString: source.url };
  // pg lets the URL's sslmode override an explicit `ssl`, so the parameter goes and our setting stays.
  const url = new URL(source.url);
  url.searchParams.delete("sslmode");
  return { connectionString: url.toString(), ssl: verifiedTls(source.caFile, "DATABASE_URL") };
}

function verifiedTls(caFile: string, setting: string): pg.PoolConfig["ssl"] {
  return { ca: readCaBundle(caFile, setting), rejectUnauthorized: true };
}

/** Who and where a secret points at: a change in any of them needs a new pool, not just a new password. */
function secretTarget(secret: RdsSecret, database: string | undefined) {
  return {
    host: secret.host,
    port: Number(secret.port ?? 5432),
    user: secret.username,
    database: database ?? secret.dbname ?? "postgres",
  };
}

/** How long a checkout waits for a re-read of the secret before it carries on with the target it has. */
export const SECRET_RECHECK_TIMEOUT_MS = 2_000;
/** After a failed re-read, checkouts use the current target without asking again for this long. */
export const SECRET_RECHECK_BACKOFF_MS = 30_000;

/**
 * A pool on the secret's current user, host, port and database. The password is read for every new connection,
 * so a single-user rotation is picked up by the next connection. Every checkout also compares the secret (cached
 * for its TTL, DATABASE_SECRET_TTL_SECONDS) with the pool's target: a restored or replaced cluster (`host`), an
 * alternating-users rotation (`username`), a moved database (`port`, `dbname`) get a new pool within the TTL even
 * while the old host still answers, which would otherwise keep warm relays publishing from the old database. An
 * authentication failure fetches the secret at once. The old pool is ended once its checked-out sessions come
 * back, and none of its idle ones is used again.
 *
 * A re-read that fails or takes longer than SECRET_RECHECK_TIMEOUT_MS (Secrets Manager unreachable) keeps the
 * current target, reported through onError, and is not tried again for SECRET_RECHECK_BACKOFF_MS: an outage of
 * Secrets Manager never stops a relay whose database is fine, and costs at most one short wait per 30 s.
 *
 * Each target followed gets a new number (`targetOf` a checked-out session): what the relay checks once per
 * database (its order key) it checks again before relaying on a new one.
 */
class SecretPool implements DatabasePool {
  #pool: pg.Pool;
  #target: string;
  /** Bumped by each new pool (each target followed); sessions are tagged with their pool's. */
  #generation = 0;
  readonly #generations = new WeakMap<pg.Pool, number>();
  readonly #sessions = new WeakMap<object, number>();
  #recheckAfter = 0;
  readonly #secrets: SecretCache;
  readonly #source: DatabaseSource & { kind: "secret" };
  readonly #config: pg.PoolConfig;
  readonly #onError: ((error: Error) => void) | undefined;
  readonly #authRetryMs: number;
  readonly #deadline: (() => number | undefined) | undefined;
  readonly #retired: Promise<void>[] = [];

  static async open(
    source: DatabaseSource & { kind: "secret" },
    common: pg.PoolConfig,
    options: PoolOptions,
  ): Promise<SecretPool> {
    const ssl = source.tls === "disable" ? false : verifiedTls(source.caFile, "DATABASE_CA_FILE");
    const secrets = new SecretCache(
      options.secrets ?? (await secretsManagerClient()),
      source.secretArn,
      source.ttlMs,
    );
    const secret = await secrets.get();
    return new SecretPool(source, { ...common, ssl }, secrets, secret, options);
  }

  private constructor(
    source: DatabaseSource & { kind: "secret" },
    config: pg.PoolConfig,
    secrets: SecretCache,
    secret: RdsSecret,
    options: PoolOptions,
  ) {
    this.#source = source;
    this.#config = config;
    this.#secrets = secrets;
    this.#onError = options.onError;
    this.#authRetryMs = options.authRetryMs ?? AUTH_RETRY_MS;
    this.#deadline = options.deadline;
    this.#target = "";
    this.#pool = this.#poolFor(secret);
  }

  #poolFor(secret: RdsSecret): pg.Pool {
    const target = secretTarget(secret, this.#source.database);
    this.#target = JSON.stringify(target);
    const pool = new pg.Pool({
      ...this.#config,
      ...target,
      // Read for every new connection, so a rotated password is picked up without a restart.
      password: async () => (await this.#secrets.get()).password,
    });
    handleConnectionErrors(pool, this.#onError);
    this.#generations.set(pool, ++this.#generation);
    return pool;
  }

  async connect(): Promise<SessionClient> {
    await this.#recheck();
    const started = Date.now();
    const giveUpAt = Math.min(started + this.#authRetryMs, this.#deadline?.() ?? Number.POSITIVE_INFINITY);
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#checkout(this.#pool);
      } catch (error) {
        if (!isAuthenticationFailure(error)) throw explainTlsError(error, this.#source);
        // Rotated since we cached it, or a rotation is between setting the new password and making it current:
        // fetch the whole secret again (and follow it wherever it now points), at once the first time, then with
        // backoff until the bound.
        const delay = attempt === 1 ? 0 : backoffDelayMs(attempt - 1, AUTH_RETRY_BASE_MS, AUTH_RETRY_CAP_MS);
        if (Date.now() + delay >= giveUpAt) throw this.#authenticationError(error, attempt, started);
        if (delay > 0) await sleep(delay);
        this.#follow(await this.#secrets.refresh());
      }
    }
  }

  #authenticationError(error: unknown, attempts: number, started: number): Error {
    let target: { user?: string; host?: string; port?: number; database?: string } = {};
    try {
      target = JSON.parse(this.#target);
    } catch {}
    return new Error(
      `the database refused the password of ${target.user}@${target.host}:${target.port}/${target.database} ` +
        `${attempts} times in ${Math.round((Date.now() - started) / 1000)} s, re-reading secret ` +
        `${this.#source.secretArn} before each try (${(error as Error).message}): the secret's AWSCURRENT ` +
        "password is not the database's. A rotation that set the new password but did not finish (see the " +
        "rotation Lambda's log and the secret's AWSPENDING version), or a password changed outside the secret",
      { cause: error },
    );
  }

  /** A session tagged with the target of the pool it came from (a re-target may happen while it connects). */
  async #checkout(pool: pg.Pool): Promise<SessionClient> {
    const session = await pool.connect();
    this.#sessions.set(session, this.#generations.get(pool) ?? 0);
    return session;
  }

  targetOf(session: Queryable): number {
    return this.#sessions.get(session) ?? 0;
  }

  /** Follows the secret as cached (re-read once its TTL has passed), within a bounded wait. */
  async #recheck(): Promise<void> {
    if (Date.now() < this.#recheckAfter) return;
    let timer: NodeJS.Timeout | undefined;
    try {
      const secret = await Promise.race([
        this.#secrets.get(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no answer within ${SECRET_RECHECK_TIMEOUT_MS} ms`)),
            SECRET_RECHECK_TIMEOUT_MS,
          );
        }),
      ]);
      this.#follow(secret);
    } catch (error) {
      this.#recheckAfter = Date.now() + SECRET_RECHECK_BACKOFF_MS;
      this.#onError?.(
        new Error(
          `re-reading the database secret failed (${(error as Error).message}); staying on the current target ` +
            `for ${SECRET_RECHECK_BACKOFF_MS / 1000} s`,
          { cause: error },
        ),
      );
    } finally {
      clearTimeout(timer);
    }
  }

  /** A new pool when the secret points elsewhere; the old one ends once its checked-out sessions are back. */
  #follow(secret: RdsSecret): void {
    if (JSON.stringify(secretTarget(secret, this.#source.database)) === this.#target) return;
    const old = this.#pool;
    this.#pool = this.#poolFor(secret);
    this.#retired.push(old.end());
  }

  async end(): Promise<void> {
    await Promise.all([this.#pool.end(), ...this.#retired]);
  }
}

/**
 * TLS failures say what to change: pg's own messages ("The server does not support SSL connections",
 * "self-signed certificate in certificate chain") name neither the setting nor the fix.
 */
function explainTlsError(error: unknown, source: DatabaseSource): unknown {
  const message = error instanceof Error ? error.message : "";
  const where = source.kind === "url" ? "DATABASE_URL" : "the secret's host";
  if (/does not support SSL/i.test(message)) {
    const fix =
      source.kind === "url"
        ? "add ?sslmode=disable to DATABASE_URL if this is a local server without TLS"
        : "set DATABASE_SSLMODE=disable if this is a local server without TLS";
    return new ConfigError(
      `${where} does not accept TLS, which is required by default (verify-full); ${fix}`,
      { cause: error },
    );
  }
  if (
    /certificate|self[- ]signed|unable to (get|verify)|altnames|CERT_/i.test(
      `${message} ${(error as { code?: string }).code ?? ""}`,
    )
  ) {
    return new ConfigError(
      `TLS verification of ${where} failed (${message}): set DATABASE_CA_FILE to the CA bundle that signed ` +
        `the server's certificate (for RDS: the global bundle, global-bundle.pem), connect by the host name on ` +
        `the certificate, or set sslrootcert=<file> in DATABASE_URL`,
      { cause: error },
    );
  }
  return error;
}

function readCaBundle(file: string, setting: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (error) {
    const choices =
      setting === "DATABASE_URL"
        ? "; a DATABASE_URL without sslmode=disable|no-verify or sslrootcert is verified against the RDS CA " +
          "bundle: set DATABASE_CA_FILE to the bundle (global-bundle.pem), or add sslmode=disable to DATABASE_URL " +
          "for a local server without TLS"
        : "; set DATABASE_CA_FILE to the RDS CA bundle (global-bundle.pem)";
    throw new ConfigError(`cannot read the database CA bundle ${file}${choices}`, { cause: error });
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
