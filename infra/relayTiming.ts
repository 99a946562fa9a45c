import { DEFAULT_RELAY_OPTIONS, roundReserveMs } from "../functions/shared/relay/engine.ts";
import { HANDOVER_STARTUP_MS } from "../functions/shared/relay/handover.ts";
import { oversizeAllowanceMs } from "../functions/shared/relay/loadBudget.ts";
import { RELAY_SETTINGS } from "../functions/shared/relay/settings.ts";
import { checkIntegerOption } from "../functions/shared/util/env.ts";

/** The relay handler's default `RELAY_BUDGET_MARGIN_MS` (its settings table). */
export const DEFAULT_BUDGET_MARGIN_MS: number = RELAY_SETTINGS.budgetMarginMs.default;

/**
 * Time the handler needs besides the dwell loop: the `relay finished` log line, the summary, Powertools' flush.
 * Measured in tens of milliseconds; 5 s leaves room for a slow log flush without ever cutting a round.
 */
export const HANDLER_SLACK_MS = 5_000;

/** Lambda's hard ceiling on one invocation. */
export const LAMBDA_MAX_TIMEOUT_SECONDS = 900;

/**
 * How far a scheduled tick may land from its nominal time. EventBridge rules (and Scheduler with its flexible
 * window off) fire "within the minute" of the scheduled time, not on the second: a tick due at 12:00:00 may run
 * at any moment of [12:00:00, 12:01:00). Two consecutive ticks can therefore be as close as 0 s (the first
 * late, the second early) or as far apart as the interval plus 60 s.
 */
export const SCHEDULE_JITTER_SECONDS = 60;

/** EventBridge accepts at most 5 targets per rule: the relay's ticks are one rule with `relays` targets. */
export const MAX_RELAYS = 5;

export interface RelayTimingInput {
  /** Seconds between two scheduled invocations (EventBridge rates are whole minutes). */
  scheduleSeconds: number;
  /** How late or early a tick may fire, as the width of its window; default SCHEDULE_JITTER_SECONDS. */
  jitterSeconds?: number;
  /** Invocations started per tick (one rule, `relays` targets). Default 1. */
  relays?: number;
  publishTimeoutMs?: number;
  statementTimeoutMs?: number;
  budgetMarginMs?: number;
  /**
   * The largest message the relay may load: with largePayloads its maxPayloadBytes (the claim check's
   * destination takes that much). Default 0: none loads past the round's budget.
   */
  maxMessageBytes?: number;
  /** RELAY_BATCH_MAX_BYTES; default the relay's. */
  batchMaxBytes?: number;
  /** RELAY_HANDOVER_PROVING_MS; default the relay's. */
  handoverProvingMs?: number;
}

export interface RelayTiming {
  /**
   * publishTimeout + 3 x statementTimeout (+ 2 x the load allowance with largePayloads): the relay starts a round
   * only if this much is left.
   */
  roundReserveMs: number;
  /**
   * What the round that loads a payload past its byte budget adds to its load's statement timeout and to its
   * publish timeout, each (functions/shared/relay/loadBudget.ts): 0 without largePayloads.
   */
  loadAllowanceMs: number;
  /**
   * What the dwell cap allows the latest tick's invocation to start and prove itself before its predecessor stops
   * claiming: HANDOVER_STARTUP_MS + RELAY_HANDOVER_PROVING_MS.
   */
  handoverAllowanceMs: number;
  /** RELAY_MAX_DURATION_MS: how long one invocation dwells. */
  maxDurationMs: number;
  /** The Lambda timeout. */
  timeoutSeconds: number;
  /** Invocations of one tick's target that can be running at once, jitter included. */
  concurrencyPerRelay: number;
  /** The relay's reserved concurrency: `relays` x concurrencyPerRelay. */
  reservedConcurrency: number;
  /** The longest time between two consecutive ticks: interval + jitter. */
  longestTickGapSeconds: number;
}

/**
 * Sizes the relay Lambda so that, in dwell mode, some invocation is always claiming rows (no moment without a
 * relay) while invocations never pile up, however late or early EventBridge fires a tick. With the defaults
 * (1-minute schedule, jitter 60 s, publish timeout 10 s, statement timeout 5 s, margin 5 s):
 *
 * - Tick k fires at 60k + e(k), e(k) in [0, 60). The next one starts at most 60 + 60 = 120 s later (tick k
 *   early, tick k+1 late), so an invocation must keep starting rounds for 120 s, and then until that next one
 *   claims and has proved itself (the hand-over, functions/shared/relay/handover.ts): its start-up allowance
 *   (HANDOVER_STARTUP_MS, 5 s) plus its proving period (RELAY_HANDOVER_PROVING_MS, 5 s), 130 s. Without the
 *   allowance the latest tick after an early one left its cold start and first round with nobody claiming.
 * - A round needs a reserve of 10 + 3 x 5 = 25 s, so an invocation that dwells D seconds starts its last round at
 *   D - 25 s. D = 120 + 10 + 25 = 155 s (RELAY_MAX_DURATION_MS). Without the jitter term, a tick that fires at
 *   12:00:01 followed by one at 12:01:59 leaves nearly a minute in which nobody claims. The cap is the safety
 *   net: with hand-overs an invocation normally returns a few seconds after the next tick's, and is billed for that.
 * - The handler stops at min(start + D, deadline - margin). For D to be the binding limit, the timeout is
 *   D + margin + slack = 155 + 5 + 5 = 165 s.
 * - An invocation alive at time t started in (t - 165, t]; its tick was due in (t - 165 - 60, t], a window of
 *   225 s that holds at most ceil(225 / 60) = 4 due times. So at most 4 run at once per target: reserved
 *   concurrency 4 x relays admits every legal overlap, and anything beyond (someone invoking the relay by hand,
 *   a duplicate delivery) is throttled, which the throttle alarm reports, instead of piling up. Overlap is
 *   safe: rows are claimed with SKIP LOCKED and an aggregate's head is claimed by one relay only.
 * - No early/late pair of ticks can exceed that: two ticks 0 s apart are two of the 4.
 *
 * With largePayloads (64 MiB by default) one round at a time may load a payload past its 16 MiB budget: up to
 * 1.5 x 64 = 96 MiB of jsonb text, 80 MiB past the budget, budgeted at 4 MiB/s (loadBudget.ts): 20 s more for
 * that round's load statement and 20 s more for its publish (the S3 upload). The reserve is then
 * 10 + 3 x 5 + 2 x 20 = 65 s, D = 120 + 10 + 65 = 195 s, the timeout 205 s, and ceil((205 + 60) / 60) = 5
 * invocations per target can be alive at once.
 */
export function relayTiming(input: RelayTimingInput): RelayTiming {
  const publishTimeoutMs = input.publishTimeoutMs ?? DEFAULT_RELAY_OPTIONS.publishTimeoutMs;
  const statementTimeoutMs = input.statementTimeoutMs ?? DEFAULT_RELAY_OPTIONS.statementTimeoutMs;
  const budgetMarginMs = input.budgetMarginMs ?? DEFAULT_BUDGET_MARGIN_MS;
  const jitterSeconds = input.jitterSeconds ?? SCHEDULE_JITTER_SECONDS;
  const relays = input.relays ?? 1;
  if (
    !Number.isInteger(input.scheduleSeconds) ||
    input.scheduleSeconds < 60 ||
    input.scheduleSeconds % 60 !== 0
  ) {
    throw new Error(`relay schedule must be a whole number of minutes, got ${input.scheduleSeconds} s`);
  }
  if (!Number.isInteger(jitterSeconds) || jitterSeconds < 0 || jitterSeconds > input.scheduleSeconds) {
    throw new Error(
      `schedule jitter must be whole seconds from 0 to the schedule (${input.scheduleSeconds} s), got ${jitterSeconds}`,
    );
  }
  if (!Number.isInteger(relays) || relays < 1 || relays > MAX_RELAYS) {
    throw new Error(
      `relays must be an integer from 1 to ${MAX_RELAYS} (EventBridge's targets per rule), got ${relays}`,
    );
  }
  const options = {
    ...DEFAULT_RELAY_OPTIONS,
    publishTimeoutMs,
    statementTimeoutMs,
    batchMaxBytes: input.batchMaxBytes ?? DEFAULT_RELAY_OPTIONS.batchMaxBytes,
  };
  const maxMessageBytes = input.maxMessageBytes ?? 0;
  const reserveMs = roundReserveMs(options, maxMessageBytes);
  const handoverProvingMs = input.handoverProvingMs ?? RELAY_SETTINGS.handoverProvingMs.default;
  checkIntegerOption(
    "OutboxRelay relay.handoverProvingMs",
    handoverProvingMs,
    RELAY_SETTINGS.handoverProvingMs.min,
    RELAY_SETTINGS.handoverProvingMs.max,
  );
  const handoverAllowanceMs = HANDOVER_STARTUP_MS + handoverProvingMs;
  const longestTickGapSeconds = input.scheduleSeconds + jitterSeconds;
  const maxDurationMs = longestTickGapSeconds * 1000 + handoverAllowanceMs + reserveMs;
  const timeoutSeconds = Math.ceil((maxDurationMs + budgetMarginMs + HANDLER_SLACK_MS) / 1000);
  if (timeoutSeconds > LAMBDA_MAX_TIMEOUT_SECONDS) {
    throw new Error(
      `relay timeout would be ${timeoutSeconds} s (schedule ${input.scheduleSeconds} s + jitter ${jitterSeconds} s ` +
        `+ hand-over allowance ${handoverAllowanceMs} ms + round reserve ${reserveMs} ms + margin ${budgetMarginMs} ms + slack): over Lambda's ` +
        `${LAMBDA_MAX_TIMEOUT_SECONDS} s; use a shorter schedule or shorter publish/statement timeouts`,
    );
  }
  const concurrencyPerRelay = Math.ceil((timeoutSeconds + jitterSeconds) / input.scheduleSeconds);
  return {
    roundReserveMs: reserveMs,
    loadAllowanceMs: oversizeAllowanceMs(maxMessageBytes, options.batchMaxBytes),
    handoverAllowanceMs,
    maxDurationMs,
    timeoutSeconds,
    concurrencyPerRelay,
    reservedConcurrency: relays * concurrencyPerRelay,
    longestTickGapSeconds,
  };
}

/**
 * The relay's reserved concurrency: none unless asked. Lambda refuses a reservation that would leave the account
 * less than its unreserved minimum ("You can reserve up to the Unreserved account concurrency value minus 100",
 * Lambda developer guide, "Configuring reserved concurrency"; accounts with a smaller quota keep a smaller floor,
 * 10 for a new account's quota of 10), so any reservation fails the first deploy in a new account. When asked,
 * never fewer than the overlapping invocations the schedule starts (relayTiming's reservedConcurrency): fewer
 * would throttle a legal overlap and leave minutes in which no relay claims.
 */
export function relayReservedConcurrency(
  asked: number | boolean | undefined,
  timing: { reservedConcurrency: number; concurrencyPerRelay: number },
  relays: number,
): number | undefined {
  if (asked === undefined || asked === false) return undefined;
  if (asked === true) return timing.reservedConcurrency;
  checkIntegerOption("OutboxRelay relay.reservedConcurrency", asked, 1, 1000);
  if (asked < timing.reservedConcurrency) {
    throw new Error(
      `OutboxRelay relay.reservedConcurrency ${asked} is below the ${timing.reservedConcurrency} concurrent ` +
        `invocations the schedule can start (${relays} relay target(s) x ${timing.concurrencyPerRelay} ` +
        "overlapping invocations each; relayTiming in infra/relayTiming.ts): raise it, set it to true to reserve " +
        "exactly that, or leave it unset",
    );
  }
  return asked;
}

/**
 * How many consecutive periods of `periodSeconds` without a sign of life a "did not run" alarm waits for. The longest
 * gap between two ticks (interval + jitter) fully covers at most ceil(gap / period) - 1 whole periods, so
 * ceil(gap / period) empty periods cannot happen while the schedule works; one period more absorbs the minute or
 * so CloudWatch may take to deliver a datapoint. Default schedule: ceil(120 / 60) + 1 = 3 minutes.
 */
export function silentPeriodsBeforeAlarm(longestTickGapSeconds: number, periodSeconds: number): number {
  return Math.ceil(longestTickGapSeconds / periodSeconds) + 1;
}

/**
 * How many periods an alarm on one of AWS/Lambda's metrics (Errors, Throttles) of a function evaluates. Lambda
 * sends them when an invocation ends, stamped with its start, so a datapoint can appear up to the function's
 * timeout after its period closed; the window must still hold that period then: N x period >= timeout + period,
 * N = ceil(timeout / period) + 1. The relay at its 165 s default: ceil(165 / 60) + 1 = 4 one-minute periods.
 */
export function lambdaMetricPeriods(timeoutSeconds: number, periodSeconds: number): number {
  return Math.ceil(timeoutSeconds / periodSeconds) + 1;
}

/** 1 MiB. */
export const MIB = 1_048_576;

/**
 * RELAY_BATCH_MAX_BYTES the construct sets when none is given: the relay's own default, 16 MiB of payload per
 * round. A full 250-row batch of 1 MiB messages is cut at 16 rows; smaller messages rarely reach the cap.
 */
export const DEFAULT_BATCH_MAX_BYTES: number = DEFAULT_RELAY_OPTIONS.batchMaxBytes;

/**
 * Memory the relay needs besides payloads. Node 24 with pg, the SQS and Secrets Manager clients, Powertools and
 * middy loaded is 77 MiB resident (measured after a full GC); 256 MB leaves the garbage collector room to work
 * without thrashing, and the Lambda runtime its own share.
 */
export const RELAY_BASE_MEMORY_MB = 256;

/**
 * Bytes of memory per payload byte of a round at its peak. Reading 64 rows of 1 MiB as `payload::text` with pg
 * grew the heap and external memory by 148 MiB (2.3x: pg's receive buffer and the decoded strings); with a
 * character outside Latin-1 in each row, which makes V8 store the string as UTF-16, 70.8 MiB grew it by 170 MiB
 * (2.4x). Message bodies are those same strings; 3 leaves room for the SendMessageBatch bodies (at most 1 MiB,
 * `concurrency` of them in flight) and the SDK's copies of them.
 */
export const PAYLOAD_COPIES = 3;

/**
 * Lambda gives a function CPU in proportion to its memory: "at 1,769 MB, a function has the equivalent of one
 * vCPU (one vCPU-second of credits per second)" (AWS Lambda developer guide, "Configure Lambda function memory").
 */
export const LAMBDA_MB_PER_VCPU = 1_769;

/**
 * Events/s one relay invocation publishes per vCPU of its share, default options, SQS +20 ms per request: the
 * bench's `quota` part runs the relay in its own process under a CPU quota of a memory size's share
 * (docs/benchmarks.md, "One relay invocation on a Lambda's CPU share"). How the figure is taken: events/s ÷ vCPU
 * share of every run at the sizes where the share is the limit (448 to 1,024 MB; at 1,769 MB and without a quota
 * the bench machine's two cores, shared with Postgres and the endpoint, bind first), then about their tenth
 * percentile, since the same code's CPU per event drifted by up to 2x over an afternoon on that shared machine.
 * Eight quota runs of 2026-12-02 after the relay's CPU cuts (bench/results/2026-12-02T10-47-08.json, 10-49-33,
 * 10-50-44, 11-00-53, 11-04-28, 11-06-38, 11-09-10, 11-21-09; load average 1-6): 46 runs, 4,430-11,240 per vCPU,
 * median ~7,500, tenth percentile ~5,700. 5,500. (Issue 33's 7,500 came from runs before that day's merges, which then
 * cost ~25 % more CPU per event; the cuts won that back.)
 */
export const RELAY_EVENTS_PER_VCPU = 5_500;

/**
 * The largest target one invocation is sized for (1,984 MB, 1.1 vCPU). With SQS +20 ms, 1,769 MB published
 * 3,400-7,000 events/s in the runs above and no quota 3,100-7,600: there the bench machine, not the share, was the
 * limit, so no run shows one invocation past ~7,600. Its ceiling is the relay's one JavaScript thread: 58-127 µs
 * of it per event in those runs (173 in one disturbed run; the process adds 25-50 µs on V8's GC and libuv
 * threads), so no memory takes one invocation past ~8,000-17,000 events/s. 10,000 would take 10,000 x 82-175 µs,
 * more than one whole vCPU of process CPU kept fully busy, and no run here shows it: this machine cannot give the
 * relay more than one core to itself. More throughput per outbox takes more relay targets (`relays`, up to 5), each sized for its share:
 * 10,000 events/s is `relays: 2` at 5,000 each (1,664 MB). RELAY_CONCURRENCY does not help: 25 requests x
 * 4 rounds in flight at 20 ms already allow ~50,000 events/s; the CPU binds first.
 */
export const RELAY_MAX_EVENTS_PER_INVOCATION = 6_000;

/**
 * The default throughput target of one relay target: 1,000 events/s, above what the services that adopt an outbox
 * write (tens to hundreds of events/s; issue 41). Sizing for it: 1,000 / 5,500 = 0.18 vCPU = 322 MB -> 384 MB,
 * below the 448 MB the rounds' payloads need with the defaults, so the payloads decide: 448 MB (0.25 vCPU), which
 * published 1,100-2,500 events/s in the quota runs above (median ~1,900). A busier outbox raises
 * `relay.targetEventsPerSecond`: 3,000 (an SQS FIFO queue's rate without high-throughput mode) is 1,024 MB, which
 * published 3,117-6,506 events/s in all 16 runs above. docs/cost.md prices each size.
 */
export const DEFAULT_TARGET_EVENTS_PER_SECOND = 1_000;

/** The memory whose CPU share lets one invocation publish `targetEventsPerSecond`, rounded up to 64 MB. */
export function throughputMemoryMb(targetEventsPerSecond: number): number {
  if (Number.isInteger(targetEventsPerSecond) && targetEventsPerSecond > RELAY_MAX_EVENTS_PER_INVOCATION) {
    throw new Error(
      `OutboxRelay relay.targetEventsPerSecond ${targetEventsPerSecond} is over the ` +
        `${RELAY_MAX_EVENTS_PER_INVOCATION} events/s one relay invocation reaches even on a whole vCPU ` +
        "(relayTiming.ts, docs/benchmarks.md): spread the load over more relay targets (`relays`), each sized " +
        "for its share",
    );
  }
  checkIntegerOption(
    "OutboxRelay relay.targetEventsPerSecond",
    targetEventsPerSecond,
    1,
    RELAY_MAX_EVENTS_PER_INVOCATION,
  );
  const vcpu = targetEventsPerSecond / RELAY_EVENTS_PER_VCPU;
  return Math.max(128, Math.ceil((vcpu * LAMBDA_MB_PER_VCPU) / 64) * 64);
}

/** The relay's memory with the construct's defaults: what the bench's `quota` part measures. */
export function defaultRelayMemory(): RelayMemory {
  return relayMemory({
    batchMaxBytes: DEFAULT_BATCH_MAX_BYTES,
    parallelRounds: DEFAULT_RELAY_OPTIONS.parallelRounds,
    batchSize: DEFAULT_RELAY_OPTIONS.batchSize,
    maxMessageBytes: MIB,
  });
}

/** Copies of the one payload loaded past the budget with the claim check (relayMemory). */
const OVERSIZE_COPIES = 6;

export interface RelayMemoryInput {
  /** RELAY_BATCH_MAX_BYTES: payload bytes one round may hold. */
  batchMaxBytes: number;
  /** RELAY_PARALLEL_ROUNDS: rounds in memory at once. */
  parallelRounds: number;
  /** RELAY_BATCH_SIZE. */
  batchSize: number;
  /** RELAY_MAX_MESSAGE_BYTES: no row larger than this is sent (larger ones are dead-lettered). */
  maxMessageBytes: number;
  /** Events/s one invocation should reach (its CPU share); default DEFAULT_TARGET_EVENTS_PER_SECOND. */
  targetEventsPerSecond?: number;
  /** With the claim check (OUTBOX_MAX_PAYLOAD_BYTES): one payload this large may be loaded past the budget. */
  maxPayloadBytes?: number;
}

export interface RelayMemory {
  /** What one round can hold: min(batchMaxBytes, batchSize x maxMessageBytes). */
  roundBytes: number;
  /** The smallest memory size that fits every round in flight: base + copies x rounds x roundBytes. */
  payloadMb: number;
  /** The memory whose CPU share reaches the throughput target (throughputMemoryMb). */
  throughputMb: number;
  /** The relay's memory: the larger of the two. */
  memoryMb: number;
}

/**
 * The relay's memory, from its byte budget and its throughput target. Payloads, with the defaults (16 MiB per
 * round, 4 parallel rounds, batch 250, 1 MiB messages): a round holds min(16, 250 x 1) = 16 MiB; four rounds in
 * flight at 3 copies each are 192 MiB; plus the 256 MB base that is 448 MB (bench: the relay draining 1 MiB
 * events with these defaults peaked at 344 MiB RSS). Throughput: 1,000 events/s by default, 384 MB. Each rounded
 * up to a multiple of 64 MB, within Lambda's 128-10,240 MB. Less memory than payloadMb is refused (rounds would
 * not fit); less than throughputMb only publishes fewer events per second.
 *
 * Copies of the one payload loaded past the budget (the claim check: one round per invocation at a time,
 * relay/engine.ts): pg's bytes and string, the compact text, the upload's Buffer. Measured (bench "relay peak
 * RSS", 4 payloads of 64 MiB): 483 MiB peak, 363 MiB over idle, ~5.7 x 64 MiB; 6 x 64 MiB = 384 MB more
 * than the budget's 448 MB: 832 MB.
 */
export function relayMemory(input: RelayMemoryInput): RelayMemory {
  const roundBytes = Math.min(input.batchMaxBytes, input.batchSize * input.maxMessageBytes);
  const needed =
    RELAY_BASE_MEMORY_MB +
    (PAYLOAD_COPIES * input.parallelRounds * roundBytes) / MIB +
    (OVERSIZE_COPIES * (input.maxPayloadBytes ?? 0)) / MIB;
  const payloadMb = Math.max(128, Math.ceil(needed / 64) * 64);
  if (payloadMb > 10_240) {
    throw new Error(
      `the relay would need ${payloadMb} MB (${PAYLOAD_COPIES} x ${input.parallelRounds} parallel rounds x ` +
        `${roundBytes} bytes per round + ${RELAY_BASE_MEMORY_MB} MB` +
        `${input.maxPayloadBytes === undefined ? "" : ` + ${OVERSIZE_COPIES} x ${input.maxPayloadBytes} bytes of one large payload`}` +
        "): over Lambda's 10,240 MB; lower relay.batchMaxBytes or relay.parallelRounds",
    );
  }
  const throughputMb = throughputMemoryMb(input.targetEventsPerSecond ?? DEFAULT_TARGET_EVENTS_PER_SECOND);
  return { roundBytes, payloadMb, throughputMb, memoryMb: Math.max(payloadMb, throughputMb) };
}
