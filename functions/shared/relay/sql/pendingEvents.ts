import type { Queryable } from "../../db/session.ts";
import type { OutboxNames } from "../../outbox/names.ts";
import { livePending } from "../../outbox/pendingPredicates.ts";

/**
 * Is any event waiting to be published (not published, not dead-lettered; claimable, locked by a stuck statement,
 * in backoff or delayed)? Asked once at the end of an invocation that had failed rounds and published nothing, to
 * tell "nothing to do" from a quiet stall (relayInvocation.ts). One descent of the pending_group_live index (0007):
 * the first live pending entry answers it, however large the backlog.
 */
export async function hasPendingEvents(db: Queryable, names: OutboxNames): Promise<boolean> {
  const { rows } = await db.query<{ pending: boolean }>(
    `select exists (
       select 1 from ${names.qualified} where ${livePending()}
     ) as pending`,
  );
  return rows[0]?.pending === true;
}
