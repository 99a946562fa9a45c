import type pg from "pg";
import { DatabaseTimeoutError, TransactionRolledBackError } from "../outbox/errors.ts";

/**
 * The one database seam. Core functions take a `Queryable` (pg's Client, PoolClient or Pool all fit) or a
 * pool they can check a session out of, never a global, so the write API joins the caller's transaction.
 */
export interface QueryResultLike<R> {
  rows: R[];
  rowCount: number | null;
  /** The command tag; COMMIT of an aborted transaction reports "ROLLBACK". */
  command?: string;
}

export interface Queryable {
  // biome-ignore lint/suspicious/noExplicitAny: pg's own signature; rows are typed at each call site.
  query<R = any>(text: string, values?: unknown[]): Promise<QueryResultLike<R>>;
}

export interface SessionClient extends Queryable {
  release(destroy?: boolean | Error): void;
  /** pg's: the transaction status of the server's last ReadyForQuery ("I", "T" or "E"). */
  getTransactionStatus?(): string | null;
  on?(event: "error", listener: (error: Error) => void): unknown;
  off?(event: "error", listener: (error: Error) => void): unknown;
}

export interface SessionPool {
  connect(): Promise<SessionClient>;
  /** pg.Pool's settings: what a caller that needs several sessions at once checks before it waits forever. */
  readonly options?: { max?: number };
  /**
   * Which database target a session checked out of this pool is on: a number that changes each time the pool
   * follows its secret somewhere else (connection.ts, SecretPool), never reused. Absent: one target for the
   * pool's life. What must be checked once per database (the relay's order key) is checked again per target.
   */
  targetOf?(session: Queryable): number;
}

/**
 * Bounds for one transaction, set transaction-locally (`set_config(…, true)`) so a pooled session (pgbouncer,
 * RDS Proxy) is left as it was. Each is a server-side bound: a client-side timeout does not stop the backend.
 */
export interface TransactionBounds {
  statementTimeoutMs?: number;
  lockTimeoutMs?: number;
  /** Ends the session (and releases its locks) if it sits idle in the transaction this long: a frozen process. */
  idleInTransactionMs?: number;
  /** One repeatable-read, read-only snapshot for every statement (monitoring reads), instead of read committed. */
  readOnlySnapshot?: boolean;
  /**
   * Begins `read write` explicitly, so a session (or role, or database) default of
   * `default_transaction_read_only = on` cannot turn the transaction's writes into errors.
   */
  readWrite?: boolean;
  /**
   * Ends the transaction (commit or rollback) and, in the same round trip, discards what a session keeps across
   * transactions: `reset session authorization`, `reset role`, `reset all` first (the defaults are the server's,
   * the role's and database's, and the connection's startup parameters; what follows then runs as the session's
   * own user and search path), then `close all` (WITH HOLD cursors), `unlisten *`, `pg_advisory_unlock_all()`
   * (session advisory locks, which a rollback keeps), `discard temp`, `discard sequences`, and the prepared
   * statements SQL PREPARE made (a rollback keeps them too). That is DISCARD ALL, which itself cannot run in the
   * implicit transaction a multi-statement text is, less DISCARD PLANS (no later statement can see a cached plan)
   * and less the client's own protocol-level statements (pg caches their names per connection). For a
   * transaction that runs code the caller does not control (the consumer's handlers): what it left on the
   * session would otherwise reach the next transaction on it, or behind a transaction pooler another client's.
   * One Query message, so a transaction pooler (pgbouncer, RDS Proxy) keeps the backend until all of it ran.
   */
  resetSession?: boolean;
}

const SETTING_OF: Record<
  Exclude<keyof TransactionBounds, "readOnlySnapshot" | "readWrite" | "resetSession">,
  string
> = {
  statementTimeoutMs: "statement_timeout",
  lockTimeoutMs: "lock_timeout",
  idleInTransactionMs: "idle_in_transaction_session_timeout",
};

/**
 * Runs `work` in a transaction on a session of its own, within `bounds`; rolls back (and discards a broken
 * session) on error.
 *
 * - `read committed` is explicit: a role, database or RDS parameter group may set
 *   `default_transaction_isolation = repeatable read`, under which a claim racing another relay's commit fails
 *   with 40001 (https://www.postgresql.org/docs/current/transaction-iso.html#XACT-REPEATABLE-READ). Every
 *   statement here is written for read committed's per-statement snapshot.
 * - A COMMIT answered with ROLLBACK (the transaction was already aborted) throws TransactionRolledBackError:
 *   a caller must never take a rolled-back transaction for a committed one.
 */
export async function withTransaction<T>(
  pool: pg.Pool,
  work: (client: pg.PoolClient) => Promise<T>,
  bounds?: TransactionBounds,
): Promise<T>;
export async function withTransaction<T>(
  pool: SessionPool,
  work: (client: SessionClient) => Promise<T>,
  bounds?: TransactionBounds,
): Promise<T>;
export async function withTransaction<T>(
  pool: SessionPool,
  // A pg.Pool's sessions are PoolClients: its callers get pg's type.
  work: (client: SessionClient & pg.PoolClient) => Promise<T>,
  bounds: TransactionBounds = {},
): Promise<T> {
  const client = await pool.connect();
  // A checked-out pg client reports a dropped socket as an 'error' event; unheard, it would crash the process.
  // The failing query rejects as well, which is where we handle it.
  const ignore = () => {};
  client.on?.("error", ignore);
  try {
    await client.query(
      bounds.readOnlySnapshot === true
        ? "begin isolation level repeatable read, read only"
        : bounds.readWrite === true
          ? "begin isolation level read committed, read write"
          : "begin isolation level read committed",
    );
    await setBounds(client, bounds);
    const result = await work(client as SessionClient & pg.PoolClient);
    const committed = commandOf(
      await client.query(bounds.resetSession === true ? `commit; ${DISCARD_SESSION}` : "commit"),
    );
    if (committed === "ROLLBACK") {
      throw new TransactionRolledBackError(
        "COMMIT was answered with ROLLBACK: the transaction had already failed (an error caught inside it), nothing it wrote was kept",
      );
    }
    client.off?.("error", ignore);
    client.release();
    return result;
  } catch (error) {
    client.off?.("error", ignore);
    if (isClientTimeout(error)) {
      // The server did not answer in time: the connection is presumed dead, and a ROLLBACK queued behind the
      // unanswered statement would wait just as long. Destroying the socket ends the transaction on the server
      // (or its idle_in_transaction_session_timeout does, if the path is gone), so the row locks are released.
      client.release(error as Error);
      throw new DatabaseTimeoutError(
        "the database did not answer in time (connection dropped or server unreachable); the session was discarded",
        { cause: error },
      );
    }
    // A failed rollback means the connection itself is gone: destroy it rather than return it to the pool.
    const rollbackFailed = await client
      .query(bounds.resetSession === true ? `rollback; ${DISCARD_SESSION}` : "rollback")
      .then(
        () => false,
        () => true,
      );
    client.release(rollbackFailed ? (error as Error) : undefined);
    throw error;
  }
}

/**
 * What follows the commit or rollback in its simple-protocol round trip (TransactionBounds.resetSession). pg
 * answers a multi-statement text with one result per statement; the commit's is the first. A failed commit stops
 * the text there (and its rollback undoes the transaction's settings by itself). Each statement here may run in
 * a transaction block, which DISCARD ALL may not; the DO block deallocates only what SQL PREPARE made
 * (`from_sql`), so the client's protocol-level statements stay valid. Measured on the loaded 2-core machine
 * (pgbench, one session, begin / select 1 / this text): 0.19-0.21 ms a transaction with the resets alone,
 * 0.33-0.38 ms with the whole text.
 */
export const DISCARD_SESSION =
  "reset session authorization; reset role; reset all; close all; unlisten *; " +
  "select pg_catalog.pg_advisory_unlock_all(); discard temp; discard sequences; " +
  "do $discard$ declare statement_name text; begin for statement_name in select name from pg_catalog.pg_prepared_statements " +
  "where from_sql loop execute pg_catalog.format('deallocate %I', statement_name); end loop; end $discard$";

function commandOf(result: QueryResultLike<unknown> | QueryResultLike<unknown>[]): string | undefined {
  return Array.isArray(result) ? result[0]?.command : result.command;
}

/** One round trip for all bounds; the setting names are constants, the values bound parameters. */
async function setBounds(client: Queryable, bounds: TransactionBounds): Promise<void> {
  const calls: string[] = [];
  const values: string[] = [];
  for (const [key, setting] of Object.entries(SETTING_OF)) {
    const ms = bounds[key as keyof typeof SETTING_OF];
    if (ms === undefined) continue;
    values.push(String(ms));
    calls.push(`set_config('${setting}', $${values.length}, true)`);
  }
  if (calls.length > 0) await client.query(`select ${calls.join(", ")}`, values);
}

/** pg's `query_timeout` (the pool's queryTimeoutMs) fired: no answer, not a server-side error. */
export function isClientTimeout(error: unknown): boolean {
  return error instanceof Error && error.message === "Query read timeout";
}
