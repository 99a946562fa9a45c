import { RolesElsewhereError } from "../db/rolesHere.ts";
import { type Queryable, type SessionPool, withTransaction } from "../db/session.ts";
import type { Destination } from "../destinations/destination.ts";
import { errorMessage } from "../outbox/errors.ts";
import { MAX_DELAY_MS } from "../outbox/message.ts";
import { type OutboxLocation, type OutboxNames, outboxNames } from "../outbox/names.ts";
import type { ClaimedRow } from "../outbox/row.ts";
import { backoffDelayMs } from "../util/backoff.ts";
import { checkIntegerOption } from "../util/env.ts";
import type { Logger } from "../util/logger.ts";
import { sleep } from "../util/sleep.ts";
import { oversizeAllowanceMs, pastBudgetMs } from "./loadBudget.ts";
import { OrderKeyError } from "./orderKey.ts";
import { type LoadedRow, type PublishResult, publishRows } from "./publisher.ts";
import { type ClaimCursor, claimBatch, newClaimCursor } from "./sql/claimBatch.ts";
import { loadPayloads, type PayloadLimits } from "./sql/loadPayloads.ts";
import { type Retention, type RowOutcome, recordOutcomes } from "./sql/recordOutcomes.ts";

export interface RelayOptions extends OutboxLocation {
  /** Rows claimed per round (1-1000). */
  batchSize: number;
  /** Publish requests (SendMessageBatch, PutEvents) in flight at once. */
  concurrency: number;
  /**
   * Failed tries after which a row becomes a dead letter; only failures the message caused count (the
   * destination refused it as the sender's fault, or it cannot be made into a message). The destination's own
   * failures never dead-letter.
   */
  maxAttempts: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** A dead letter blocks the rest of its aggregate (instead of being parked, SQS FIFO DLQ style). */
  strictOrder: boolean;
  /**
   * Payload and header bytes one round loads at most (the first row always loads): bounds a round's memory by
   * bytes, not only by batchSize. Rows past it stay pending for the next round.
   */
  batchMaxBytes: number;
  /** `drain`: stop when nothing is claimable. `dwell`: keep polling until the time budget ends. */
  mode: "drain" | "dwell";
  /** Upper bound on one round's publishing; requests still in flight then are aborted. */
  publishTimeoutMs: number;
  /** statement_timeout for the claim and record statements. */
  statementTimeoutMs: number;
  /** Dwell mode's idle polling: starts at min after a busy round, doubles while idle, up to max. */
  idlePollMinMs: number;
  idlePollMaxMs: number;
  /**
   * Rounds in flight at once, each a loop of its own on its own session, so one round's claim and record
   * overlap another's publish. Safe by the claim's rule: an aggregate's head is claimed by one round only.
   */
  parallelRounds: number;
  /**
   * What a published row becomes: `keep` marks it and the purge deletes it after PURGE_RETENTION_HOURS (audit and
   * replay from the table); `delete` deletes it at once, for about a sixth of the relay's WAL (recordOutcomes.ts).
   */
  retention: Retention;
}

export const DEFAULT_RELAY_OPTIONS = {
  // A round's publishing is one wave of batch / 10 requests at this concurrency, so a round costs about one SQS
  // round trip whatever its size, and bigger rounds amortize it. Measured on the 2-core bench machine, where
  // Postgres, the endpoint and the relay share the CPU (docs/benchmarks.md): 100 x 10 gave 9.0k events/s at 0 ms
  // and 5.4k at 20 ms; 250 x 25 11.6k and 8.7k; 500 x 50 9.1k and 9.4k, but its 500-row claims took p99 12-15 ms
  // (the claim target is 10 ms) and its latency p99 at 3,000 events/s rose to 104 ms. 250 x 25 is the balance.
  batchSize: 250,
  concurrency: 25,
  maxAttempts: 10,
  backoffBaseMs: 1_000,
  backoffMaxMs: 300_000,
  strictOrder: false,
  // Measured (bench "relay peak RSS", 400 events of ~1 MiB): a round's memory is ~3x the payload bytes it
  // loads (pg's result, the compact body, the SDK's request JSON). Two rounds of 32 MiB peaked at 303 MiB RSS
  // (99 idle), against 611 MiB with every claimed payload loaded: a 512 MB Lambda keeps its headroom. Small
  // events rarely reach it (250 x 10 KB = 2.5 MB).
  // With 4 rounds in flight, 32 MiB each peaked at 421 MiB: 16 MiB keeps a 512 MB Lambda's headroom.
  batchMaxBytes: 16 * 1_048_576,
  mode: "dwell",
  publishTimeoutMs: 10_000,
  statementTimeoutMs: 5_000,
  idlePollMinMs: 10,
  idlePollMaxMs: 250,
  // Publishing is 60-77% of a round (bench): each round in flight adds a wave of requests per SQS round trip.
  // Against a 20 ms SQS, 250 x 25 gave 9.3k events/s with 2 rounds and 10.8k with 4, for two more sessions.
  parallelRounds: 4,
  retention: "keep",
} as const satisfies RelayOptions;

export interface RoundReport {
  claimed: number;
  published: number;
  failed: number;
  deadLettered: number;
  held: number;
  durationMs: number;
  /** Per published event: its type and publish time minus created_at, for lag percentiles. */
  publishedEvents: { eventType: string; lagMs: number }[];
  /** Per failed event, for metrics by event type. */
  failedEvents: { eventType: string; deadLettered: boolean }[];
  /**
   * Rows whose payload did not load within the load's statement_timeout (sql/loadPayloads.ts `timedOut`): each
   * counted as a transient failure of its row, with the reason in its last_error.
   */
  loadTimeouts: number;
  /** The error of this round's last failed event, if one failed: what a failed invocation names as its cause. */
  lastPublishError?: string;
  /**
   * Behind a router (destinations/routing/): published and failed events per destination name
   * (`sqs-fifo:orders.fifo`, `none` for events no route takes). Absent with a single destination.
   */
  destinations?: Record<string, DestinationCounts>;
}

export interface DestinationCounts {
  published: number;
  failed: number;
}

export interface RelayDeps {
  pool: SessionPool;
  /** The SQS FIFO queue or EventBridge bus (destinations/); the loop does not know which. */
  destination: Destination;
  /** Epoch milliseconds by which runRelay must have returned (Lambda deadline minus a safety margin). */
  deadline: number;
  logger?: Logger;
  /** Stop claiming (SIGTERM, Ctrl-C); the round in progress finishes and records what it published. */
  signal?: AbortSignal;
  /** Wakes an idle dwell loop early (LISTEN/NOTIFY); optional. */
  wakeUp?: { wait(ms: number, signal?: AbortSignal): Promise<void> };
  onRound?(report: RoundReport): void;
  /** A round failed as a whole (its rows released): told at once, so metrics can report a stall mid-invocation. */
  onRoundFailed?(error: unknown): void;
  now?: () => number;
  /**
   * Checks the order key on a round's session before it claims, when that session is on a target not checked
   * yet (a pool that followed a moved secret); its OrderKeyError or RolesElsewhereError stops the run
   * (relay/orderKey.ts).
   */
  orderKey?: { ensure(session: Queryable): Promise<void> };
}

export interface RelaySummary {
  claimed: number;
  published: number;
  failed: number;
  deadLettered: number;
  rounds: number;
  /** Rounds that failed as a whole (database unreachable, ...); their rows were released, not lost. */
  failedRounds: number;
  durationMs: number;
  /**
   * Why it stopped. `handedOver` and `idle` are set by the invocation (handover.ts), whose stop request the loop
   * sees as `signal`.
   */
  stoppedBy: "drained" | "deadline" | "signal" | "errors" | "handedOver" | "idle";
  /** The last whole-round error (database unreachable, timed out). */
  lastError?: string;
  /** The last error of one event's publish (SQS unreachable, throttled, denied, the entry refused). */
  lastPublishError?: string;
}

const DRAIN_MAX_CONSECUTIVE_ERRORS = 3;
/** 1 GiB: more than any Lambda can give a round (10 GB memory at most, shared by the parallel rounds). */
export const MAX_BATCH_MAX_BYTES = 1_073_741_824;

/**
 * The accepted range of each numeric option, whether it comes from code or from the environment (the table in
 * settings.ts takes its limits from here). backoffMaxMs and idlePollMaxMs must also be at least their minimum
 * partner, checked below.
 */
export const RELAY_OPTION_LIMITS = {
  batchSize: { min: 1, max: 1000 },
  concurrency: { min: 1, max: 100 },
  maxAttempts: { min: 1, max: 1000 },
  backoffBaseMs: { min: 1, max: 86_400_000 },
  backoffMaxMs: { min: 1, max: 86_400_000 },
  batchMaxBytes: { min: 1024, max: MAX_BATCH_MAX_BYTES },
  publishTimeoutMs: { min: 100, max: 900_000 },
  statementTimeoutMs: { min: 100, max: 900_000 },
  idlePollMinMs: { min: 1, max: 60_000 },
  idlePollMaxMs: { min: 1, max: 60_000 },
  parallelRounds: { min: 1, max: 16 },
} as const satisfies Partial<Record<keyof RelayOptions, { min: number; max: number }>>;

export function validateRelayOptions(options: RelayOptions): RelayOptions {
  const floor: Partial<Record<keyof typeof RELAY_OPTION_LIMITS, number>> = {
    backoffMaxMs: options.backoffBaseMs,
    idlePollMaxMs: options.idlePollMinMs,
  };
  for (const [name, { min, max }] of Object.entries(RELAY_OPTION_LIMITS)) {
    const key = name as keyof typeof RELAY_OPTION_LIMITS;
    checkIntegerOption(name, options[key], floor[key] ?? min, max);
  }
  outboxNames(options);
  return options;
}

/**
 * Time one round may need from claim to commit; no round starts with less than this left. A round is three
 * statements (claim, load payloads, record; each under statement_timeout) around one publish (under the publish
 * timeout); BEGIN, SET and COMMIT are cheap and fall within the Lambda budget margin. A destination whose largest
 * message can be loaded past the round's byte budget (`maxMessageBytes`, the claim check's 64 MiB) adds the
 * allowance of loadBudget.ts twice: the load's and the publish's.
 */
export function roundReserveMs(options: RelayOptions, maxMessageBytes = 0): number {
  return (
    options.publishTimeoutMs +
    3 * options.statementTimeoutMs +
    2 * oversizeAllowanceMs(maxMessageBytes, options.batchMaxBytes)
  );
}

/**
 * The relay: claim -> publish -> record, one transaction per round, until the budget ends (dwell), nothing is
 * claimable (drain) or a stop is requested, with `parallelRounds` loops at once. A round starts only if it can
 * finish before the deadline, so a Lambda timeout never catches a round holding locks; and if the process dies
 * anyway, the transaction rolls back and the rows are claimed again (an SQS FIFO queue deduplicates them on their outbox id; a bus's consumers do).
 */
export async function runRelay(deps: RelayDeps, options: RelayOptions): Promise<RelaySummary> {
  validateRelayOptions(options);
  const now = deps.now ?? Date.now;
  const started = now();
  const summary: RelaySummary = {
    claimed: 0,
    published: 0,
    failed: 0,
    deadLettered: 0,
    rounds: 0,
    failedRounds: 0,
    durationMs: 0,
    stoppedBy: "drained",
  };
  const fatal: { error?: OrderKeyError | RolesElsewhereError } = {};
  const oversize: OversizeGate = { busy: false };
  const reasons = await Promise.all(
    Array.from({ length: options.parallelRounds }, () =>
      relayLoop(deps, options, summary, now, fatal, oversize),
    ),
  );
  // An order key that ran backwards, or roles of another database, is not a round's failure to retry: nothing
  // may be relayed from there.
  if (fatal.error !== undefined) throw fatal.error;
  // The most telling reason wins: a loop that gave up on errors, then a stop request, then the deadline.
  summary.stoppedBy = STOP_PRIORITY.find((reason) => reasons.includes(reason)) ?? "drained";
  summary.durationMs = now() - started;
  return summary;
}

const STOP_PRIORITY = ["errors", "signal", "deadline", "drained"] as const;

/** One loop of rounds; adds its rounds to the shared summary and says why it stopped. */
async function relayLoop(
  deps: RelayDeps,
  options: RelayOptions,
  summary: RelaySummary,
  now: () => number,
  fatal: { error?: OrderKeyError | RolesElsewhereError },
  oversize: OversizeGate,
): Promise<RelaySummary["stoppedBy"]> {
  let idleMs = options.idlePollMinMs;
  let consecutiveErrors = 0;
  // This loop's place in the claim's round robin over aggregates (see claimBatch).
  const cursor = newClaimCursor();

  for (;;) {
    if (fatal.error !== undefined) return "errors";
    if (deps.signal?.aborted) {
      return "signal";
    }
    if (deps.deadline - now() < roundReserveMs(options, deps.destination.maxMessageBytes)) {
      return "deadline";
    }
    let report: RoundReport;
    try {
      report = await relayRound(deps, options, cursor, oversize);
      consecutiveErrors = 0;
    } catch (error) {
      if (error instanceof OrderKeyError || error instanceof RolesElsewhereError) {
        fatal.error = error;
        return "errors";
      }
      summary.failedRounds++;
      summary.lastError = errorMessage(error);
      consecutiveErrors++;
      deps.logger?.error("relay round failed; its rows were released for the next round", {
        error: summary.lastError,
        consecutiveErrors,
      });
      try {
        deps.onRoundFailed?.(error);
      } catch (observerError) {
        deps.logger?.warn("round observer failed", { error: errorMessage(observerError) });
      }
      if (options.mode === "drain" && consecutiveErrors >= DRAIN_MAX_CONSECUTIVE_ERRORS) {
        return "errors";
      }
      idleMs = Math.min(options.idlePollMaxMs * 4, Math.max(idleMs * 2, options.idlePollMinMs));
      await pause(deps, Math.min(idleMs, Math.max(0, deps.deadline - now())), false);
      continue;
    }
    summary.rounds++;
    summary.claimed += report.claimed;
    summary.published += report.published;
    summary.failed += report.failed;
    summary.deadLettered += report.deadLettered;
    if (report.lastPublishError !== undefined) summary.lastPublishError = report.lastPublishError;
    try {
      deps.onRound?.(report);
    } catch (error) {
      // Observers (metrics) must never stop the relay.
      deps.logger?.warn("round observer failed", { error: errorMessage(error) });
    }

    const fullBatch = report.claimed === options.batchSize && report.published > 0;
    if (fullBatch) {
      idleMs = options.idlePollMinMs;
      continue; // more is waiting: go again at once
    }
    // An empty claim that stopped at its examine cap (a long run of blocked aggregates) has not looked at every
    // aggregate yet (see claimBatch): not drained. Dwell paces such windows like any idle poll.
    if (options.mode === "drain" && report.claimed === 0 && cursor.sawAll) return "drained";
    // Busy but not full: poll again soon. Idle or everything failed: back off, up to the cap.
    idleMs = report.published > 0 ? options.idlePollMinMs : Math.min(options.idlePollMaxMs, idleMs * 2);
    if (options.mode === "drain" && report.published === 0) {
      // Everything claimed failed and is now in backoff; the next claim finds nothing and ends the drain.
      continue;
    }
    const reserveMs = roundReserveMs(options, deps.destination.maxMessageBytes);
    await pause(deps, Math.min(idleMs, Math.max(0, deps.deadline - now() - reserveMs)), true);
  }
}

async function pause(deps: RelayDeps, ms: number, wakeable: boolean) {
  if (ms <= 0) return;
  if (wakeable && deps.wakeUp) return deps.wakeUp.wait(ms, deps.signal);
  await sleep(ms, deps.signal);
}

/**
 * Which round of this process may load a row past its byte budget (the first sendable row of a round always
 * loads, whatever its size). One at a time: with the claim check a payload can be 64 MiB, and 4 parallel rounds
 * each holding one (with its compact copy and the upload's) would be ~4 x 3 x 64 MiB. The others load within
 * their budget and hold such a row for a later round. Measured in docs/benchmarks.md ("relay peak RSS").
 */
export interface OversizeGate {
  busy: boolean;
}

/** One round in one transaction: claim a batch, publish it, record every outcome, commit. */
export async function relayRound(
  deps: RelayDeps,
  options: RelayOptions,
  cursor: ClaimCursor = newClaimCursor(),
  oversize?: OversizeGate,
): Promise<RoundReport> {
  const gated = oversize !== undefined && !oversize.busy;
  if (gated) oversize.busy = true;
  try {
    return await claimPublishRecord(deps, options, cursor, oversize === undefined || gated);
  } finally {
    if (gated) oversize.busy = false;
  }
}

async function claimPublishRecord(
  deps: RelayDeps,
  options: RelayOptions,
  cursor: ClaimCursor,
  loadOversized: boolean,
): Promise<RoundReport> {
  const names = outboxNames(options);
  const started = performance.now();
  // The round that may load a row past its byte budget gives that load, and the publish, more time
  // (loadBudget.ts); roundReserveMs counts it, so the round still ends before the deadline.
  const allowanceMs = loadOversized
    ? oversizeAllowanceMs(deps.destination.maxMessageBytes, options.batchMaxBytes)
    : 0;
  // The idle bound covers the publish, when the session sits idle in the transaction holding row locks: if this
  // process freezes or dies, Postgres ends the session and releases the rows within that bound.
  const bounds = {
    statementTimeoutMs: options.statementTimeoutMs,
    lockTimeoutMs: options.statementTimeoutMs,
    idleInTransactionMs: options.publishTimeoutMs + allowanceMs + options.statementTimeoutMs,
  };
  const report = await withTransaction(
    deps.pool,
    async (client) => {
      await deps.orderKey?.ensure(client);
      const rows = await claimBatch(client, names, {
        limit: options.batchSize,
        strictOrder: options.strictOrder,
        cursor,
      });
      if (rows.length === 0) return emptyReport(0);

      const { sendable, results, loadedBytes, loadTimeouts } = await loadRows(
        client,
        names,
        rows.filter((row) => !row.delayed_beyond),
        options,
        {
          maxMessageBytes: deps.destination.maxMessageBytes,
          loadOversized,
          ...(allowanceMs > 0
            ? {
                timeouts: {
                  statementMs: options.statementTimeoutMs,
                  walkMs: options.statementTimeoutMs + allowanceMs,
                },
              }
            : {}),
        },
      );
      results.push(...rows.filter((row) => row.delayed_beyond).map(delayedTooLong));
      // The publish scales with what was loaded past the budget (the claim check uploads it), within allowanceMs.
      const publishMs = options.publishTimeoutMs + pastBudgetMs(loadedBytes, options.batchMaxBytes);
      results.push(
        ...(await publishRows(deps.destination, sendable, {
          concurrency: options.concurrency,
          signal: AbortSignal.timeout(publishMs),
        })),
      );
      const outcomes = results.flatMap((result) => toOutcome(result, options));
      await recordOutcomes(client, names, outcomes, options.retention);
      const publishedAt = Date.now();
      const deadLettered = new Set(
        outcomes.filter((outcome) => outcome.deadLetter).map((outcome) => outcome.id),
      );
      const report = emptyReport(0);
      report.claimed = rows.length;
      report.loadTimeouts = loadTimeouts;
      const destinationOf = deps.destination.destinationOf?.bind(deps.destination);
      const perDestination: Record<string, DestinationCounts> = {};
      for (const result of results) {
        if (destinationOf !== undefined && result.status !== "held") {
          const name = destinationOf(result.row);
          const counts = perDestination[name] ?? { published: 0, failed: 0 };
          perDestination[name] = counts;
          if (result.status === "published") counts.published++;
          else counts.failed++;
        }
        if (result.status === "published") {
          report.published++;
          report.publishedEvents.push({
            eventType: result.row.event_type,
            lagMs: publishedAt - Number(result.row.created_at),
          });
        } else if (result.status === "held") {
          report.held++;
        } else {
          const dead = deadLettered.has(result.row.id);
          report.failed++;
          if (dead) report.deadLettered++;
          report.failedEvents.push({ eventType: result.row.event_type, deadLettered: dead });
          report.lastPublishError = result.error;
          logFailure(deps.logger, result, dead, destinationOf?.(result.row));
        }
      }
      if (destinationOf !== undefined) report.destinations = perDestination;
      return report;
    },
    bounds,
  );
  report.durationMs = performance.now() - started; // claim to commit: what the rows' locks cost
  return report;
}

/**
 * Loads the claimed rows' payloads within the round's byte budget. A row certainly over the queue's limit is
 * rejected without its text ever reaching this process; a row past the budget is held for a later round.
 */
async function loadRows(
  client: Queryable,
  names: OutboxNames,
  rows: readonly ClaimedRow[],
  options: RelayOptions,
  limits: Omit<PayloadLimits, "budgetBytes">,
): Promise<{ sendable: LoadedRow[]; results: PublishResult[]; loadedBytes: number; loadTimeouts: number }> {
  const loaded = new Map(
    (
      await loadPayloads(
        client,
        names,
        rows.toSorted(bySeq).map((row) => row.id),
        { ...limits, budgetBytes: options.batchMaxBytes },
      )
    ).map((payload) => [payload.id, payload]),
  );
  const sendable: LoadedRow[] = [];
  const results: PublishResult[] = [];
  let loadedBytes = 0;
  let loadTimeouts = 0;
  for (const row of rows) {
    const payload = loaded.get(row.id);
    if (payload === undefined || payload.status === "overBudget") {
      results.push({ row, status: "held" });
    } else if (payload.status === "unsendable") {
      results.push({ row, status: "rejected", error: payload.error, permanent: true });
    } else if (payload.status === "timedOut") {
      // Slow, not malformed: a transient failure (backoff, never a dead letter), named in last_error.
      results.push({ row, status: "unsent", error: payload.error });
      loadTimeouts++;
    } else {
      loadedBytes += payload.bytes;
      sendable.push({ ...row, payload: payload.payload, headers: payload.headers });
    }
  }
  return { sendable, results, loadedBytes, loadTimeouts };
}

/**
 * Outbox order. seq is a bigint in decimal text without leading zeros: between non-negative ones a shorter text
 * is a smaller number and texts of one length compare as strings, with no BigInt parsed per comparison (that
 * made ~16 allocations per event). A negative seq (only by hand: the identity starts at 1) takes the exact path.
 */
function bySeq(a: ClaimedRow, b: ClaimedRow): number {
  if (a.seq.startsWith("-") || b.seq.startsWith("-")) {
    const [x, y] = [BigInt(a.seq), BigInt(b.seq)];
    return x < y ? -1 : x > y ? 1 : 0;
  }
  return a.seq.length - b.seq.length || (a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0);
}

/**
 * Published rows are marked; held rows are left alone. A rejected message (its own fault) counts an attempt
 * and dead-letters at max attempts, or at once when permanent. A failure on SQS's side (`unsent`: the request
 * failed as a whole, or the entry with SenderFault = false; `uncertain`: it may have arrived) counts a transient failure instead, backs off on
 * that count (capped, jittered) and never dead-letters: an SQS outage, however long, must not turn the backlog
 * into dead letters, nor leave heads one InternalError away from it.
 */
function toOutcome(result: PublishResult, options: RelayOptions): RowOutcome[] {
  const { row } = result;
  if (result.status === "held") return [];
  if (result.status === "published") return [{ id: row.id, published: true }];
  const rejected = result.status === "rejected";
  const failures = (rejected ? row.attempts : row.transient_failures) + 1;
  return [
    {
      id: row.id,
      published: false,
      error: result.error,
      retryInMs: backoffDelayMs(failures, options.backoffBaseMs, options.backoffMaxMs),
      deadLetter: rejected && (result.permanent || failures >= options.maxAttempts),
      counts: rejected ? "attempt" : "transient",
    },
  ];
}

/** A row delayed past MAX_DELAY_MS (claimBatch): malformed, dead-lettered at once, naming the field. */
function delayedTooLong(row: ClaimedRow): PublishResult {
  const days = MAX_DELAY_MS / 86_400_000;
  const error = `available_at: is ${row.delayed_beyond}, more than ${days} days ahead; taken as malformed`;
  return { row, status: "rejected", error, permanent: true };
}

function logFailure(
  logger: Logger | undefined,
  result: PublishResult,
  deadLettered: boolean,
  destination: string | undefined,
) {
  if (result.status === "published" || result.status === "held") return;
  const fields = {
    ...(destination === undefined ? {} : { destination }),
    eventId: result.row.id,
    eventType: result.row.event_type,
    aggregateType: result.row.aggregate_type,
    aggregateId: result.row.aggregate_id,
    ...(result.status === "rejected"
      ? { attempt: result.row.attempts + 1 }
      : { transientFailure: result.row.transient_failures + 1 }),
    failure: result.status,
    error: result.error,
  };
  if (deadLettered) logger?.error("event dead-lettered", fields);
  else logger?.warn("event publish failed; will retry after backoff", fields);
}

function emptyReport(durationMs: number): RoundReport {
  return {
    claimed: 0,
    published: 0,
    failed: 0,
    deadLettered: 0,
    held: 0,
    loadTimeouts: 0,
    durationMs,
    publishedEvents: [],
    failedEvents: [],
  };
}
