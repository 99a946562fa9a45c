import { type SessionClient, withTransaction } from "../db/session.ts";
import { DatabaseTimeoutError, OutboxError } from "../outbox/errors.ts";
import type { InboxSession } from "./inboxOptions.ts";

/**
 * The record's transaction, through the one seam (db/session.ts withTransaction): `read committed` explicitly, and a
 * COMMIT answered with ROLLBACK throws TransactionRolledBackError. A lent session (`withClient`) goes through
 * the same function; its lender keeps it (a session withTransaction would discard is reported by the error
 * it rethrows).
 */
export type TransactionRunner = <T>(work: (client: SessionClient) => Promise<T>) => Promise<T>;

export function transactionRunner(session: InboxSession): TransactionRunner {
  if (session.pool !== undefined) {
    const pool = session.pool;
    return (work) => withTransaction(pool, work);
  }
  const lend = session.withClient;
  return (work) =>
    lend((client) => {
      const lent: SessionClient = {
        query: (text, values) => client.query(text, values),
        release: () => {},
        on: (event, listener) => client.on?.(event, listener),
        off: (event, listener) => client.off?.(event, listener),
      };
      return withTransaction({ connect: async () => lent }, work);
    });
}

/** 40001 (serialization failure) and 40P01 (deadlock): the server rolled back; the same work may succeed. */
export function isConflict(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "40001" || code === "40P01";
}

/** SQLSTATE classes that mean the database (not the statement) failed: connection, shutdown, resources. */
const OUTAGE_SQLSTATE = /^(08|57P0[123]|53300$)/;

/**
 * The database failed, not the message: the client-side timeout fired, the connection broke, the server is
 * shutting down or out of connections, wherever that happened (the user's handler included); or any error of
 * the inbox's own statements that is not a fault of the record.
 */
export function isOutage(error: unknown, inUserHandler: boolean): boolean {
  if (error instanceof DatabaseTimeoutError) return true;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string") {
    if (OUTAGE_SQLSTATE.test(code)) return true;
  } else if (error instanceof Error && /ECONN|EPIPE|ETIMEDOUT|Connection terminated/i.test(error.message)) {
    return true;
  }
  return !inUserHandler && !(error instanceof OutboxError) && !isConflict(error);
}

/** 25-50 ms, then 50-100 ms: long enough for the other transaction to finish, short against any deadline. */
export function backoffMs(attempt: number): number {
  const base = 25 * 2 ** (attempt - 1);
  return base + Math.floor(Math.random() * base);
}
