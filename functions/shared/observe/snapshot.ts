import { type SessionPool, withTransaction } from "../db/session.ts";
import { type OutboxLocation, outboxNames } from "../outbox/names.ts";
import { type OutboxSnapshot, outboxSnapshot } from "./sql/outboxSnapshot.ts";

/**
 * The outbox snapshot (pending, oldest pending age, dead letters) in a transaction of its own, under a statement
 * timeout: whoever hosts it (the purge Lambda, every minute) must not hang on it. It reads only unpublished rows.
 */
export function readOutboxSnapshot(
  pool: SessionPool,
  options: OutboxLocation & { statementTimeoutMs: number },
): Promise<OutboxSnapshot> {
  const names = outboxNames(options);
  return withTransaction(pool, (client) => outboxSnapshot(client, names), {
    statementTimeoutMs: options.statementTimeoutMs,
    idleInTransactionMs: options.statementTimeoutMs,
  });
}
