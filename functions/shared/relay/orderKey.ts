import { type Queryable, type SessionPool, withTransaction } from "../db/session.ts";
import { ConfigError } from "../outbox/errors.ts";
import type { OutboxNames } from "../outbox/names.ts";

/** The order key (seq) has run backwards or can: relaying now would let events overtake each other unnoticed. */
export class OrderKeyError extends ConfigError {
  override name = "OrderKeyError";
}

interface OrderKeyState {
  sequence_name: string;
  sequence_last_value: string | null;
  sequence_cache: string | null;
  latest_published_seq: string | null;
}

/**
 * Refuses to relay when the order key cannot be trusted (migration 0006, {{related:order_key_state}}):
 * - the sequence is below the seq of the most recently published row (restarted lower, setval, a restore into a
 *   fresh sequence, a Blue/Green switchover whose green sequence lagged): new events would carry smaller seqs
 *   than events consumers already have;
 * - the sequence caches more than one value per session (CACHE > 1): two sessions draw from two ranges, so a
 *   group's later commit can take the smaller seq.
 * Cheap (one index descent), asked once per invocation before claiming. The error names the fix
 * (docs/operations.md, "Restores and Blue/Green switchovers").
 */
export async function checkOrderKey(db: Queryable, names: OutboxNames): Promise<void> {
  const { rows } = await db.query<OrderKeyState>(`select * from ${names.related("order_key_state")}()`);
  const state = rows[0];
  if (state === undefined) return;
  const cache = BigInt(state.sequence_cache ?? 1);
  if (cache > 1n) {
    throw new OrderKeyError(
      `the order key's sequence ${state.sequence_name} has CACHE ${cache}: sessions draw seqs from ranges of their ` +
        `own, so a later commit can take a smaller seq; run \`alter sequence ${state.sequence_name} cache 1\``,
    );
  }
  if (state.latest_published_seq === null) return;
  const published = BigInt(state.latest_published_seq);
  const current = state.sequence_last_value === null ? null : BigInt(state.sequence_last_value);
  if (current === null || current < published) {
    throw new OrderKeyError(
      `the order key ran backwards: sequence ${state.sequence_name} is at ${current ?? "its start (never used)"}, ` +
        `below seq ${published} of an event already published (restored, restarted or setval'd lower?); new ` +
        "events would reach consumers with smaller seqs than ones they have. Relaying stopped: run " +
        `\`select setval('${state.sequence_name}', <above the highest seq consumers have seen>)\` ` +
        "(docs/operations.md, Restores and Blue/Green switchovers)",
    );
  }
}

/**
 * checkOrderKey in a transaction of its own, within `statementTimeoutMs`: what every relay invocation runs before
 * it claims (the Lambda handler, and each invocation of `outbox relay`), since a restore or switchover can lower
 * the sequence between two of them.
 */
export async function checkOrderKeyBeforeRelaying(
  pool: SessionPool,
  names: OutboxNames,
  statementTimeoutMs: number,
): Promise<void> {
  await withTransaction(pool, (client) => checkOrderKey(client, names), { statementTimeoutMs });
}
