import type { Queryable } from "../../db/session.ts";
import type { OutboxNames } from "../../outbox/names.ts";

/**
 * Names this invocation the holder of its relay slot, unless an invocation that started later holds it already
 * (0017's relay_handover). Written once per invocation, after its first completed round: the proof that it works.
 * A later start always wins, so the holder only ever moves forward, and the invocation named there is never the
 * one that stops for a hand-over (handover.ts). Returns whether this invocation holds the slot now.
 */
export async function claimHandoverSlot(
  db: Queryable,
  names: OutboxNames,
  claim: { slot: number; invocation: string; startedAt: number },
): Promise<boolean> {
  const { rows } = await db.query<{ invocation: string }>(
    `insert into ${names.related("relay_handover")} as h (slot, invocation, started_at)
     values ($1, $2, to_timestamp($3::double precision / 1000))
     on conflict (slot) do update
       set invocation = excluded.invocation, started_at = excluded.started_at, proved_at = now()
       where h.started_at < excluded.started_at
     returning h.invocation`,
    [claim.slot, claim.invocation, claim.startedAt],
  );
  return rows[0]?.invocation === claim.invocation;
}
