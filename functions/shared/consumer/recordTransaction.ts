import { type SessionClient, type TransactionBounds, withTransaction } from "../db/session.ts";
import { isConflict, isOutage as isDatabaseOutage } from "../db/sqlstate.ts";
import { DatabaseTimeoutError, NotMigratedError, OutboxError } from "../outbox/errors.ts";
import { backoffDelayMs } from "../util/backoff.ts";
import type { InboxSession } from "./inboxOptions.ts";

/**
 * The record's transaction, through the one seam (db/session.ts withTransaction): `read committed` explicitly, and a
 * COMMIT answered with ROLLBACK throws TransactionRolledBackError. A lent session (`withClient`) goes through
 * the same function; its lender keeps it (a session withTransaction would discard is reported by the error
 * it rethrows).
 */
export type TransactionRunner = <T>(
  work: (client: SessionClient) => Promise<T>,
  bounds: TransactionBounds,
) => Promise<T>;

export function transactionRunner(session: InboxSession): TransactionRunner {
  if (session.pool !== undefined) {
    const pool = session.pool;
    return (work, bounds) => withTransaction(pool, work, bounds);
  }
  const lend = session.withClient;
  return (work, bounds) =>
    lend((client) => {
      const lent: SessionClient = {
        // Every argument as given: the guarded client sends pg config objects (transactionGuard.ts).
        query: (...args: Parameters<SessionClient["query"]>) => client.query(...args),
        release: () => {},
        on: (event, listener) => client.on?.(event, listener),
        off: (event, listener) => client.off?.(event, listener),
        // The server's transaction status, which the guard reads after each of the handler's statements.
        getTransactionStatus: () =>
          (client as { getTransactionStatus?: () => string | null }).getTransactionStatus?.() ?? null,
      };
      return withTransaction({ connect: async () => lent }, work, bounds);
    });
}

/**
 * The database failed, not the message: the client-side timeout fired, the connection broke, the server is
 * shutting down or out of connections, wherever that happened (the user's handler included); the inbox's tables not
 * migrated; or any error of the inbox's own statements that is not a fault of the record.
 */
export function isOutage(error: unknown, inUserHandler: boolean): boolean {
  if (error instanceof DatabaseTimeoutError || error instanceof NotMigratedError || isDatabaseOutage(error)) {
    return true;
  }
  return !inUserHandler && !(error instanceof OutboxError) && !isConflict(error);
}

/** 25-50 ms, then 50-100 ms: long enough for the other transaction to finish, short against any deadline. */
export function backoffMs(attempt: number): number {
  return backoffDelayMs(attempt, 50, 1_000);
}
