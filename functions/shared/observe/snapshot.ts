import { type SessionPool, withTransaction } from "../db/session.ts";
import type { RouteTable } from "../destinations/routing/table.ts";
import { type OutboxLocation, outboxNames } from "../outbox/names.ts";
import { type PendingByDestination, pendingByDestination } from "./pendingByDestination.ts";
import { type OutboxSnapshot, outboxSnapshot } from "./sql/outboxSnapshot.ts";

/** The outbox-wide snapshot and, behind a route table, the backlog per destination. */
export type RoutedOutboxSnapshot = OutboxSnapshot & Partial<PendingByDestination>;

/**
 * The outbox snapshot (pending, oldest pending age, dead letters) in a transaction of its own, under a statement
 * timeout: whoever hosts it (the purge Lambda, every minute) must not hang on it. It reads only unpublished rows.
 * With `routes` (the relay's route table, OUTBOX_ROUTES), the pending rows per destination too.
 */
export function readOutboxSnapshot(
  pool: SessionPool,
  options: OutboxLocation & { statementTimeoutMs: number; routes?: RouteTable<unknown> | undefined },
): Promise<RoutedOutboxSnapshot> {
  const names = outboxNames(options);
  const routes = options.routes;
  return withTransaction(
    pool,
    async (client) => ({
      ...(await outboxSnapshot(client, names)),
      ...(routes === undefined ? {} : await pendingByDestination(client, names, routes)),
    }),
    { statementTimeoutMs: options.statementTimeoutMs, idleInTransactionMs: options.statementTimeoutMs },
  );
}
