import { outboxMigrateHint, withMigrateHint } from "../db/notMigrated.ts";
import { activeTraceContext } from "../observe/tracing.ts";
import { ValidationError } from "../outbox/errors.ts";
import { newEventId } from "../outbox/eventId.ts";
import { jsonbBodySize } from "../outbox/jsonbSize.ts";
import {
  checkGroupId,
  checkHeaders,
  checkName,
  checkSqsText,
  MAX_DELAY_MS,
  messageAttributes,
  messageSize,
  serializePayload,
} from "../outbox/message.ts";
import { type OutboxLocation, outboxNames } from "../outbox/names.ts";
import { MAX_PAYLOAD_BYTES_LIMIT } from "../outbox/payloadPointer.ts";
import type { TraceContext } from "../outbox/traceContext.ts";
import { type EventSize, limitsGate, readLimits, refusal } from "./destinationLimits.ts";
import { joinTransaction, type RunStatement, type TransactionOf } from "./transactionHandle.ts";

export interface OutboxEvent<TPayload = unknown> {
  aggregateType: string;
  /**
   * Becomes the SQS MessageGroupId: events of one group (this id, whatever the aggregate type) are delivered in
   * the order they committed.
   */
  aggregateId: string;
  eventType: string;
  payload: TPayload;
  /**
   * Correlation ids and the like: sent as SQS message attributes (at most 4). The active OpenTelemetry context is
   * captured without using one of them (docs/tracing.md); a `traceparent` here is kept instead of it.
   */
  headers?: Record<string, string>;
  /** Not published before this time (defaults to the transaction's now()). */
  availableAt?: Date;
}

export interface EnqueuedEvent {
  id: string;
  /** The order key: within one aggregate it increases in commit order (the database enforces it, migration 0005). */
  seq: bigint;
}

/**
 * Size limits need no option: the outbox's limits row says what the relay's destinations accept and whether the
 * claim check is on (outbox_limits, written by the construct or `outbox migrate`; docs/large-payloads.md), and
 * every event is checked against it inside the insert.
 */
export interface EnqueueOptions extends OutboxLocation {
  /** A lower cap of this producer's own on body plus attributes; never raises the destinations' limit. */
  maxMessageBytes?: number;
  /**
   * @deprecated The claim check is on when the outbox's limits row says so (`largePayloads` in the construct,
   * `outbox migrate --claim-check`). Given, it still turns the claim check on for this call and caps the payload
   * (in bytes of its JSON, up to 64 MiB) below the row's `max_payload_bytes`.
   */
  maxPayloadBytes?: number;
}

interface ValidRow {
  id: string;
  aggregateType: string;
  aggregateId: string;
  eventType: string;
  payloadJson: string;
  headersJson: string;
  availableAt: Date | null;
  trace: TraceContext | undefined;
  size: EventSize;
}

// A timestamp of the length the relay will send (ISO 8601, milliseconds, Z) for the size check.
const SIZE_PROBE_DATE = new Date(0);
// The longest seq the relay can send (a bigint's 19 digits), so the size check never under-counts.
const SIZE_PROBE_SEQ = String(2n ** 63n - 1n);

/**
 * Writes events to the outbox with the caller's connection, so they commit or roll back with the caller's
 * business rows. Everything is validated before the single INSERT, and its size against the destinations' limits
 * inside it (destinationLimits.ts): a bad event throws a ValidationError naming the field and leaves the caller's
 * transaction usable and nothing written.
 *
 * The insert locks each event's aggregate until the caller's transaction ends (migration 0005), so `seq` follows
 * commit order: it waits while another open transaction holds one of them. One call never deadlocks with another
 * (several aggregates are locked in one canonical order), but a transaction that enqueues in several calls can:
 * Postgres then fails one statement with the pg error code "40P01" and the caller retries the transaction.
 *
 * `db` is the transaction's handle as the caller's data library gives it (transactionHandle.ts, docs/libraries.md):
 * a pg client after `begin`, or the transaction of postgres.js, Drizzle, Kysely, Prisma, Knex, TypeORM or
 * MikroORM. A handle that is not in a transaction (a pool, a root client, a pg client in autocommit) is refused
 * with a ValidationError before anything is sent: its events would commit by themselves.
 */
export async function enqueue<H, T>(
  db: TransactionOf<H>,
  event: OutboxEvent<T>,
  options?: EnqueueOptions,
): Promise<EnqueuedEvent>;
export async function enqueue<H, T>(
  db: TransactionOf<H>,
  events: readonly OutboxEvent<T>[],
  options?: EnqueueOptions,
): Promise<EnqueuedEvent[]>;
export async function enqueue<H, T>(
  db: TransactionOf<H>,
  input: OutboxEvent<T> | readonly OutboxEvent<T>[],
  options: EnqueueOptions = {},
): Promise<EnqueuedEvent | EnqueuedEvent[]> {
  // Joined before the first await, so the caller's callback cannot end the transaction under the insert.
  const joined = joinTransaction(db);
  try {
    return await insertEvents(joined.run, input, options);
  } finally {
    joined.leave();
  }
}

async function insertEvents<T>(
  run: RunStatement,
  input: OutboxEvent<T> | readonly OutboxEvent<T>[],
  options: EnqueueOptions,
): Promise<EnqueuedEvent | EnqueuedEvent[]> {
  const names = outboxNames(options);
  const many = Array.isArray(input);
  const events: readonly OutboxEvent<T>[] = many ? input : [input as OutboxEvent<T>];
  // The caller's span, when OpenTelemetry is there and a span is active: stored in the row's own columns
  // (migration 0013), so the consumer can continue the trace (observe/tracing.ts; nothing without OpenTelemetry).
  const active = await activeTraceContext();
  const caller = callerLimits(options);
  const rows = events.map((event, index) =>
    validateEvent(event, many ? `events[${index}]` : "event", active),
  );
  if (rows.length === 0) return [];

  // One round trip for any number of events. Ids are generated here so results can be matched by id rather
  // than trusting RETURNING order; `order by ord` makes the trigger assign seq in the array order.
  // The table's commit-order trigger (migration 0005) locks each row's aggregate before giving it a seq. Taking
  // those locks row by row in the caller's order could deadlock with a transaction writing the same aggregates
  // in another order, so a call with several aggregates first locks them all in one canonical order: the
  // uncorrelated subquery runs once, as an InitPlan, before the first row reaches the trigger. A call with one
  // aggregate skips it (one lock cannot be taken out of order), so the common single-event call pays nothing.
  const aggregates = distinctAggregates(rows);
  // The trace columns (migration 0013) are named only when an event carries a context: without OpenTelemetry,
  // or outside a span, the statement is the one before 0013, so such producers work whichever side is upgraded
  // first. With a context, run the migrations before deploying producers of this version (CHANGELOG).
  const traced = rows.some((row) => row.trace !== undefined);
  const traceSql = traced
    ? {
        columns: ", traceparent, tracestate",
        values: ", e.traceparent, e.tracestate",
        arrays: ", $8::text[], $9::text[]",
        names: "traceparent, tracestate, ",
        params: [
          rows.map((row) => row.trace?.traceparent ?? null),
          rows.map((row) => row.trace?.tracestate ?? null),
        ],
      }
    : { columns: "", values: "", arrays: "", names: "", params: [] };
  // The destinations' limits first (destinationLimits.ts): an event that does not fit makes the statement insert
  // nothing, before any aggregate is locked (a one-time filter's AND stops at its first false).
  const sizes = rows.map((row) => row.size);
  const fit = limitsGate(names, 8 + traceSql.params.length, sizes, caller);
  const next = 8 + traceSql.params.length + fit.params.length;
  const gate =
    aggregates.length > 1
      ? `where ${fit.sql} and (select ${names.related("lock_aggregates")}($${next}::text[], $${next + 1}::text[]))`
      : `where ${fit.sql}`;
  // Every value goes as text (cast in the statement), so each library's driver binds it the same way: postgres.js
  // would JSON-encode a string bound as jsonb again, and Drizzle's postgres.js serializers refuse a timestamp
  // array. The casts cost nothing measurable beside the insert. `id::text, seq::text` come back as strings
  // whatever the driver's type parsers are.
  const inserted = (await run(
    `insert into ${names.qualified}
       (id, aggregate_type, aggregate_id, event_type, payload, headers, available_at${traceSql.columns})
     select e.id::uuid, e.aggregate_type, e.aggregate_id, e.event_type, e.payload::jsonb, e.headers::jsonb,
            coalesce(e.available_at::timestamptz, now())${traceSql.values}
     from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]${traceSql.arrays})
          with ordinality as e(id, aggregate_type, aggregate_id, event_type, payload, headers, available_at,
                               ${traceSql.names}ord)
     ${gate}
     order by e.ord
     returning id::text as id, seq::text as seq`,
    [
      rows.map((row) => row.id),
      rows.map((row) => row.aggregateType),
      rows.map((row) => row.aggregateId),
      rows.map((row) => row.eventType),
      rows.map((row) => row.payloadJson),
      rows.map((row) => row.headersJson),
      rows.map((row) => row.availableAt?.toISOString() ?? null),
      ...traceSql.params,
      ...fit.params,
      ...(aggregates.length > 1
        ? [aggregates.map((aggregate) => aggregate.type), aggregates.map((aggregate) => aggregate.id)]
        : []),
    ],
  ).catch((error: unknown) => {
    // The statement names only our table and functions: 42P01/42703/42883 mean the migrations have not run.
    throw withMigrateHint(error, outboxMigrateHint(names, "the schema and table options"));
  })) as readonly { id: string; seq: string }[];
  if (inserted.length === 0) {
    const limits = await readLimits(run, names);
    throw (
      refusal(sizes, limits, caller, names.relatedName("limits")) ??
      new ValidationError(
        many ? "events" : "event",
        `did not fit the limits in ${names.relatedName("limits")}, which changed while it was checked; try again`,
      )
    );
  }
  const seqById = new Map(inserted.map((row) => [row.id, BigInt(row.seq)]));
  const result = rows.map((row) => ({ id: row.id, seq: seqById.get(row.id) ?? missing(row.id) }));
  return many ? result : (result[0] as EnqueuedEvent);
}

/**
 * The call's distinct message groups when there are several; none when every event is of one group. The lock is
 * per group (aggregate_id, migration 0006), so Order/42 and Shipment/42 count once.
 */
function distinctAggregates(rows: readonly ValidRow[]): { type: string; id: string }[] {
  const byGroup = new Map<string, { type: string; id: string }>();
  for (const row of rows) byGroup.set(row.aggregateId, { type: row.aggregateType, id: row.aggregateId });
  return byGroup.size > 1 ? [...byGroup.values()] : [];
}

function missing(id: string): never {
  throw new Error(`insert did not return event ${id}`);
}

/** The caller's own caps, checked for range here; the destinations' limits come from the database. */
function callerLimits(options: EnqueueOptions): { maxMessageBytes?: number; maxPayloadBytes?: number } {
  const { maxMessageBytes, maxPayloadBytes } = options;
  if (
    maxPayloadBytes !== undefined &&
    !(
      Number.isInteger(maxPayloadBytes) &&
      maxPayloadBytes >= 1024 &&
      maxPayloadBytes <= MAX_PAYLOAD_BYTES_LIMIT
    )
  ) {
    throw new ValidationError(
      "options.maxPayloadBytes",
      `must be an integer from 1024 to ${MAX_PAYLOAD_BYTES_LIMIT} (64 MiB), got ${maxPayloadBytes}`,
    );
  }
  if (maxMessageBytes !== undefined && !(Number.isInteger(maxMessageBytes) && maxMessageBytes >= 0)) {
    throw new ValidationError(
      "options.maxMessageBytes",
      `must be a non-negative integer, got ${maxMessageBytes}`,
    );
  }
  return {
    ...(maxMessageBytes === undefined ? {} : { maxMessageBytes }),
    ...(maxPayloadBytes === undefined ? {} : { maxPayloadBytes }),
  };
}

function validateEvent(event: OutboxEvent<unknown>, at: string, active: TraceContext | undefined): ValidRow {
  if (event === null || typeof event !== "object") {
    throw new ValidationError(at, "must be an object with aggregateType, aggregateId, eventType and payload");
  }
  const aggregateType = checkName(`${at}.aggregateType`, event.aggregateType);
  const aggregateId = checkGroupId(`${at}.aggregateId`, event.aggregateId);
  const eventType = checkName(`${at}.eventType`, event.eventType);
  const headers = checkHeaders(`${at}.headers`, event.headers);
  const payloadJson = serializePayload(`${at}.payload`, event.payload);
  checkSqsText(`${at}.payload`, payloadJson);
  const availableAt = event.availableAt ?? null;
  if (availableAt !== null && !(availableAt instanceof Date && Number.isFinite(availableAt.getTime()))) {
    throw new ValidationError(`${at}.availableAt`, "must be a valid Date");
  }
  if (availableAt !== null && availableAt.getTime() - Date.now() > MAX_DELAY_MS) {
    throw new ValidationError(
      `${at}.availableAt`,
      `is ${availableAt.toISOString()}, more than ${MAX_DELAY_MS / 86_400_000} days ahead (the relay dead-letters such rows)`,
    );
  }
  const id = newEventId();
  // A traceparent the caller passed as a header is the event's trace already; two would disagree.
  const trace = Object.keys(headers).some((name) => name.toLowerCase() === "traceparent")
    ? undefined
    : active;
  const attributes = messageAttributes({
    id,
    aggregateType,
    aggregateId,
    eventType,
    headers,
    createdAt: SIZE_PROBE_DATE,
    seq: SIZE_PROBE_SEQ,
    body: payloadJson,
    trace,
  });
  // What the relay will send: the body as jsonb prints it back (numbers in full), not JSON.stringify's text.
  const bodySize = jsonbBodySize(payloadJson);
  // Checked against the destinations' limits inside the insert (destinationLimits.ts).
  const size: EventSize = {
    at,
    messageBytes: messageSize("", attributes) + bodySize,
    bodyBytes: bodySize,
    jsonBytes: Buffer.byteLength(payloadJson),
    headerCount: Object.keys(headers).length,
  };
  return {
    id,
    aggregateType,
    aggregateId,
    eventType,
    payloadJson,
    headersJson: JSON.stringify(headers),
    availableAt,
    trace,
    size,
  };
}
