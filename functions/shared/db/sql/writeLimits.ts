import type { OutboxLimits } from "../../outbox/limits.ts";
import type { OutboxNames } from "../../outbox/names.ts";
import type { Queryable } from "../session.ts";

/**
 * Sets the outbox's limits row (migrations 0012, 0015) at deploy or migrate time: the one place the size limits
 * are set (outbox/limits.ts). Run as the migrations' user, the table's owner: producers and the relay only read
 * it. An update of the one row (0012 inserted it; the check `one_row` keeps it one), so the next insert and the
 * next `enqueue` see the new limits; a transaction open meanwhile keeps the row it read.
 */
export async function writeLimits(db: Queryable, names: OutboxNames, limits: OutboxLimits): Promise<void> {
  await db.query(
    `update ${names.related("limits")}
        set max_message_bytes = $1::integer, max_payload_bytes = $2::integer, claim_check = $3::boolean,
            limited_by = $4::text`,
    [limits.maxMessageBytes, limits.maxPayloadBytes, limits.claimCheck, limits.limitedBy ?? null],
  );
}

/** The row as it is (after the migrations: 0015's columns exist). */
export async function readLimitsRow(db: Queryable, names: OutboxNames): Promise<OutboxLimits> {
  const { rows } = await db.query<{
    max_message_bytes: number;
    max_payload_bytes: number;
    claim_check: boolean;
    limited_by: string | null;
  }>(`select max_message_bytes, max_payload_bytes, claim_check, limited_by from ${names.related("limits")}`);
  const row = rows[0];
  if (row === undefined) throw new Error(`${names.related("limits")} has no row (migration 0012 inserts it)`);
  return {
    maxMessageBytes: row.max_message_bytes,
    maxPayloadBytes: row.max_payload_bytes,
    claimCheck: row.claim_check,
    ...(row.limited_by === null ? {} : { limitedBy: row.limited_by }),
  };
}
