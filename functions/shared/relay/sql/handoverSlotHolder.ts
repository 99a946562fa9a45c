import type { Queryable } from "../../db/session.ts";
import type { OutboxNames } from "../../outbox/names.ts";

/**
 * The invocation holding a relay slot (0017's relay_handover) and when it started, or undefined before any
 * invocation proved itself there. One primary-key lookup, asked about once a second by each invocation alive.
 */
export async function handoverSlotHolder(
  db: Queryable,
  names: OutboxNames,
  slot: number,
): Promise<{ invocation: string; startedAt: number } | undefined> {
  const { rows } = await db.query<{ invocation: string; started_ms: string }>(
    `select invocation, (extract(epoch from started_at) * 1000)::bigint::text as started_ms
       from ${names.related("relay_handover")} where slot = $1`,
    [slot],
  );
  const row = rows[0];
  return row === undefined ? undefined : { invocation: row.invocation, startedAt: Number(row.started_ms) };
}
