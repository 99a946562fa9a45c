import { ValidationError } from "../outbox/errors.ts";
import { DEFAULT_OUTBOX_LIMITS, type OutboxLimits } from "../outbox/limits.ts";
import { MAX_HEADERS } from "../outbox/message.ts";
import type { OutboxNames } from "../outbox/names.ts";
import { MAX_PAYLOAD_BYTES_LIMIT } from "../outbox/payloadPointer.ts";
import type { RunStatement } from "./transactionHandle.ts";

/**
 * The write API against the destinations' limits: an event `enqueue` accepts is one the relay can deliver, never
 * one it dead-letters for its size. The limits are the outbox's row (outbox/limits.ts; the construct or
 * `outbox migrate` writes it at deploy time from what the destinations accept), not a default compiled in here:
 * a 300 KiB event bound for a 256 KiB queue is refused at the insert, naming that queue's limit.
 *
 * Read inside the insert, not before it: the statement's WHERE holds `limitsGate`, an InitPlan that compares
 * every event's sizes (computed in JS) with the row once, so checking costs no round trip. Measured on the shared
 * 2-core machine (load average ~18), 3,000 single-event calls of each kind interleaved in one transaction, median
 * per call: 0.74 ms without a check, 1.09 ms with the gate, 1.82 ms with a `select` of the row before the insert.
 * A per-process cache would cost nothing, but cannot tell two databases with the same table name apart and would
 * miss a deploy's new limit for its lifetime. When an event does not fit, the statement inserts nothing and returns no row; only then is the row
 * read again (`readLimits`), to name the event and the limit in the ValidationError. The caller's transaction
 * stays usable: nothing failed, nothing was written.
 *
 * What fits, in one rule written twice (`fits` below and the SQL, kept side by side): the message (body as jsonb
 * prints it, plus attributes) within `maxMessageBytes` (and the caller's own `maxMessageBytes`, if lower), or,
 * with the claim check (the row's `claim_check`, or the caller's `maxPayloadBytes`), a payload within
 * `maxPayloadBytes` whose headers leave a slot for ExtendedPayloadSize.
 */

/** One event's sizes, as the relay will count them (enqueue.ts computes them). */
export interface EventSize {
  /** The field named in a refusal: `event` or `events[3]`. */
  at: string;
  /** Body (jsonb's text of the payload) plus attributes: what SQS and SNS count. */
  messageBytes: number;
  /** The body alone: what the claim check puts in S3. */
  bodyBytes: number;
  /** JSON.stringify's bytes of the payload: when less than bodyBytes, numbers print longer in Postgres. */
  jsonBytes: number;
  headerCount: number;
}

/** What the caller may add: a lower message cap, or (the older way to say the claim check is on) a payload cap. */
export interface CallerLimits {
  maxMessageBytes?: number | undefined;
  maxPayloadBytes?: number | undefined;
}

/**
 * The limits row as one row of text whatever columns exist: a database still at 0012-0014 (no max_message_bytes,
 * claim_check, limited_by yet) gives the defaults, so a producer of this version works against it (through
 * to_jsonb, which has whatever columns the row has). An aggregate, so a row nobody should delete still yields one.
 */
function limitsRowSql(names: OutboxNames): string {
  const d = DEFAULT_OUTBOX_LIMITS;
  return `select coalesce(max((to_jsonb(x) ->> 'max_message_bytes')::integer), ${d.maxMessageBytes}) as max_message_bytes,
                 coalesce(max(x.max_payload_bytes), ${d.maxPayloadBytes}) as max_payload_bytes,
                 coalesce(bool_or((to_jsonb(x) ->> 'claim_check')::boolean), false) as claim_check,
                 max(to_jsonb(x) ->> 'limited_by') as limited_by
          from ${names.related("limits")} as x`;
}

/**
 * The insert's gate: true when every event fits. Parameters from `first` (all text, cast here, so each data
 * library's driver binds them alike): the caller's message cap, claim check and payload cap, then each event's
 * message size, body size and whether it could go through S3.
 */
export function limitsGate(
  names: OutboxNames,
  first: number,
  sizes: readonly EventSize[],
  caller: CallerLimits,
): { sql: string; params: unknown[] } {
  const p = (offset: number) => `$${first + offset}`;
  // Numbered in the order they appear: Knex binds `?` placeholders by position (transactionHandle.ts).
  const sql = `(select coalesce(bool_and(
        s.message_bytes <= least(l.max_message_bytes, ${p(0)}::text::integer)
        or ((l.claim_check or ${p(1)}::text::boolean) and s.via_s3
            and s.body_bytes <= least(l.max_payload_bytes, ${p(2)}::text::integer))), true)
      from unnest(${p(3)}::text[]::integer[], ${p(4)}::text[]::integer[], ${p(5)}::text[]::boolean[])
             as s(message_bytes, body_bytes, via_s3)
      cross join (${limitsRowSql(names)}) as l)`;
  return {
    sql,
    params: [
      // No cap is the largest value the row can hold, so no parameter is ever null (drivers bind null unalike).
      String(caller.maxMessageBytes ?? DEFAULT_OUTBOX_LIMITS.maxMessageBytes),
      String(caller.maxPayloadBytes !== undefined),
      String(caller.maxPayloadBytes ?? MAX_PAYLOAD_BYTES_LIMIT),
      sizes.map((size) => String(size.messageBytes)),
      sizes.map((size) => String(size.bodyBytes)),
      sizes.map((size) => String(viaS3(size))),
    ],
  };
}

/** The row, read after the gate refused (the only time it costs a round trip). */
export async function readLimits(run: RunStatement, names: OutboxNames): Promise<OutboxLimits> {
  const [row] = (await run(
    `select l.max_message_bytes::text as max_message_bytes, l.max_payload_bytes::text as max_payload_bytes,
            l.claim_check::text as claim_check, l.limited_by
     from (${limitsRowSql(names)}) as l`,
    [],
  )) as readonly {
    max_message_bytes: string;
    max_payload_bytes: string;
    claim_check: string;
    limited_by: string | null;
  }[];
  if (row === undefined) return DEFAULT_OUTBOX_LIMITS;
  return {
    maxMessageBytes: Number(row.max_message_bytes),
    maxPayloadBytes: Number(row.max_payload_bytes),
    claimCheck: row.claim_check === "true",
    limitedBy: row.limited_by ?? undefined,
  };
}

/** The ValidationError for the first event that does not fit, or undefined when all fit (the row changed since). */
export function refusal(
  sizes: readonly EventSize[],
  limits: OutboxLimits,
  caller: CallerLimits,
  table: string,
): ValidationError | undefined {
  const messageLimit = Math.min(limits.maxMessageBytes, caller.maxMessageBytes ?? Number.POSITIVE_INFINITY);
  const payloadLimit = Math.min(limits.maxPayloadBytes, caller.maxPayloadBytes ?? Number.POSITIVE_INFINITY);
  const claimCheck = limits.claimCheck || caller.maxPayloadBytes !== undefined;
  for (const size of sizes) {
    if (fits(size, messageLimit, payloadLimit, claimCheck)) continue;
    const whose =
      messageLimit < limits.maxMessageBytes
        ? "maxMessageBytes"
        : `${limits.limitedBy === undefined ? "the destinations'" : `${limits.limitedBy}'s`} limit (max_message_bytes in ${table})`;
    if (!claimCheck) {
      const numbers =
        size.bodyBytes > size.jsonBytes
          ? `; Postgres prints its numbers in full (${size.jsonBytes} bytes as JSON, ${size.bodyBytes} as ` +
            "stored): send very large or small numbers as strings"
          : "";
      return new ValidationError(
        `${size.at}.payload`,
        `message would be ${size.messageBytes} bytes (payload plus attributes), over the limit of ` +
          `${messageLimit}, ${whose}${numbers} (larger payloads: the claim check, docs/large-payloads.md)`,
      );
    }
    if (!viaS3(size)) {
      return new ValidationError(
        `${size.at}.headers`,
        `has ${size.headerCount} entries; its message (${size.messageBytes} bytes) is over the limit of ` +
          `${messageLimit} and goes through S3, which takes the ExtendedPayloadSize attribute and leaves room ` +
          `for ${MAX_HEADERS - 1}`,
      );
    }
    const payloadWhose =
      payloadLimit < limits.maxPayloadBytes ? "maxPayloadBytes" : `max_payload_bytes in ${table}`;
    return new ValidationError(
      `${size.at}.payload`,
      `is ${size.bodyBytes} bytes of JSON, over the claim check's limit of ${payloadLimit} (${payloadWhose})`,
    );
  }
  return undefined;
}

/** The rule the gate's SQL states; change both together. */
function fits(size: EventSize, messageLimit: number, payloadLimit: number, claimCheck: boolean): boolean {
  return size.messageBytes <= messageLimit || (claimCheck && viaS3(size) && size.bodyBytes <= payloadLimit);
}

/** A message through S3 carries ExtendedPayloadSize: one attribute slot the headers must leave. */
function viaS3(size: EventSize): boolean {
  return size.headerCount < MAX_HEADERS;
}
