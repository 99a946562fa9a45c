import { createDatabasePool, queryTimeoutFor } from "../db/connection.ts";
import { type SessionPool, withTransaction } from "../db/session.ts";
import type { DestinationClientOptions } from "../destinations/create.ts";
import type { Destination } from "../destinations/destination.ts";
import { ConfigError, OutboxError } from "../outbox/errors.ts";
import { outboxNames } from "../outbox/names.ts";
import type { Logger } from "../util/logger.ts";
import { type RelaySummary, type RoundReport, roundReserveMs, runRelay } from "./engine.ts";
import { type HandoverOptions, StopWatch } from "./handover.ts";
import { oversizeAllowanceMs } from "./loadBudget.ts";
import { OrderKeyGuard } from "./orderKey.ts";
import type { RelayConfig } from "./settings.ts";
import { hasPendingEvents } from "./sql/pendingEvents.ts";
import { listenForOutboxInserts } from "./wakeUp.ts";

/**
 * One relay invocation, the same for the Lambda (once per scheduled invocation) and for `outbox relay` (once per
 * simulated invocation): check the order key, open LISTEN if configured, relay until the deadline (dwell) or until
 * nothing is claimable (drain), then judge whether the invocation made progress. The caller builds the pool
 * (`relaySessions`) and the destination once and keeps them across invocations.
 */
export interface InvocationDeps {
  pool: SessionPool;
  destination: Destination;
  /** Epoch milliseconds by which the invocation returns (`invocationDeadline` for a Lambda). */
  deadline: number;
  logger: Logger;
  signal?: AbortSignal;
  onRound?(report: RoundReport): void;
  onRoundFailed?(error: unknown): void;
  /**
   * Hand over to a later invocation of the same relay slot once it proved itself (handover.ts): the Lambda's
   * scheduled invocations, in dwell mode. Absent (the CLI, tests), the invocation dwells until its deadline.
   */
  handover?: HandoverOptions;
}

export interface InvocationSummary extends RelaySummary {
  /**
   * Whether events were waiting when the invocation published nothing and some rounds failed (asked only then,
   * see noProgressError); undefined when not asked or not answerable.
   */
  pending?: boolean;
  /** Set when the invocation made no progress although there was work: the caller fails (Lambda) or reports. */
  noProgress?: NoProgressError;
}

export async function relayInvocation(deps: InvocationDeps, config: RelayConfig): Promise<InvocationSummary> {
  const names = outboxNames(config.relay);
  const { statementTimeoutMs } = config.relay;
  // Every invocation: a restore or switchover can lower the sequence between two of them. And again before the
  // first round on a new target, when the pool follows a moved secret mid-run (the guard's ensure, per round).
  const orderKey = new OrderKeyGuard(deps.pool, names);
  await orderKey.check(statementTimeoutMs);
  // LISTEN per invocation: a session kept across frozen Lambda invocations would likely be dead on the next one.
  const wakeUp = config.listen ? await listenForOutboxInserts(deps.pool, config.relay) : undefined;
  const dwell = config.relay.mode === "dwell";
  const stopWatch = new StopWatch({
    pool: deps.pool,
    names,
    statementTimeoutMs,
    logger: deps.logger,
    ...(dwell && deps.handover !== undefined
      ? { handover: deps.handover, provingMs: config.handoverProvingMs }
      : {}),
    ...(dwell && config.idleStopMs !== undefined ? { idleStopMs: config.idleStopMs } : {}),
  });
  const signal =
    deps.signal === undefined ? stopWatch.signal : AbortSignal.any([deps.signal, stopWatch.signal]);
  const onRound = (report: RoundReport) => {
    stopWatch.onRound(report);
    deps.onRound?.(report);
  };
  const onRoundFailed = (error: unknown) => {
    stopWatch.onRoundFailed();
    deps.onRoundFailed?.(error);
  };
  const summary: InvocationSummary = await runRelay(
    { ...deps, orderKey, wakeUp, signal, onRound, onRoundFailed },
    config.relay,
  ).finally(async () => {
    wakeUp?.close();
    await stopWatch.close();
  });
  if (summary.stoppedBy === "signal" && stopWatch.reason !== undefined && !deps.signal?.aborted) {
    summary.stoppedBy = stopWatch.reason;
  }
  // Idle rounds are no proof that nothing was waiting (a stuck round may hold the claim's locks): ask.
  if (summary.published === 0 && summary.failedRounds > 0 && summary.rounds > 0) {
    const pending = await withTransaction(deps.pool, (client) => hasPendingEvents(client, names), {
      statementTimeoutMs,
    }).catch(() => undefined);
    if (pending !== undefined) summary.pending = pending;
  }
  const stuck = noProgressError(summary, summary.pending);
  if (stuck !== undefined) summary.noProgress = stuck;
  return summary;
}

/**
 * The Lambda's pool, made once per container: as many sessions as one invocation uses, each statement bounded
 * client-side too (claim, record, COMMIT and ROLLBACK fail within it even if the network path died silently), and a
 * checkout retrying a rotation's authentication failures stops at `deadline()`, the current invocation's.
 */
export function relayPool(
  config: RelayConfig,
  destination: Destination,
  logger: Logger,
  deadline: () => number | undefined,
): Promise<SessionPool> {
  return createDatabasePool(config.database, {
    deadline,
    max: relaySessions(config),
    applicationName: "outbox-relay",
    queryTimeoutMs: queryTimeoutFor(longestStatementMs(config, destination.maxMessageBytes)),
    onError: (error) =>
      logger.warn("idle database connection failed; it will be replaced", { error: error.message }),
  });
}

/** Database sessions one relay needs at once: one per parallel round, plus the LISTEN session. */
export function relaySessions(config: RelayConfig): number {
  return config.relay.parallelRounds + (config.listen ? 1 : 0);
}

/**
 * Whether the destination can take the relay's messages (a queue that exists, is FIFO, takes messages as large
 * as the relay sends): one that cannot throws, naming what is wrong, instead of turning the backlog into dead
 * letters. When the check cannot be made (no permission to ask) relaying goes on, with a warning. A bus has no
 * such check: PutEvents failures are retried, never dead-lettered.
 */
export async function checkDestination(
  destination: Destination,
  logger: Logger,
  timeoutMs: number,
): Promise<void> {
  const check = (await destination.check?.(timeoutMs)) ?? { verified: true };
  if (!check.verified) logger.warn("destination not verified; relaying anyway", { reason: check.reason });
}

/** The invocation did nothing useful while events were waiting: fail it, so Lambda's Errors metric alarms. */
export class NoProgressError extends OutboxError {
  override name = "NoProgressError";
}

/**
 * The shortest invocation that fits one round: its reserve (with the claim check's load allowance) plus
 * RELAY_BUDGET_MARGIN_MS. The Lambda's timeout and a relay process's invocation are held to the same rule.
 */
export function minimumInvocationMs(config: RelayConfig, maxMessageBytes = 0): number {
  return roundReserveMs(config.relay, maxMessageBytes) + config.budgetMarginMs;
}

/**
 * When one invocation must stop: the Lambda deadline minus RELAY_BUDGET_MARGIN_MS, capped by
 * RELAY_MAX_DURATION_MS. A round starts only if roundReserveMs fits before it, so a budget below that would
 * return `rounds: 0` forever, quietly: it throws a ConfigError naming the settings and the minimum instead.
 * Checked on every invocation, because the Lambda timeout is only known from the context (Lambda exposes no
 * variable for it), and each invocation gets the whole timeout.
 */
export function invocationDeadline(
  config: RelayConfig,
  now: number,
  remainingMs: number,
  maxMessageBytes = 0,
): number {
  const reserve = roundReserveMs(config.relay, maxMessageBytes);
  const budget = Math.min(
    remainingMs - config.budgetMarginMs,
    config.maxDurationMs ?? Number.POSITIVE_INFINITY,
  );
  if (budget < reserve) {
    const minimumTimeoutS = Math.ceil(minimumInvocationMs(config, maxMessageBytes) / 1000);
    throw new ConfigError(
      `the invocation's time budget (${budget} ms: ${remainingMs} ms left of the Lambda timeout minus ` +
        `RELAY_BUDGET_MARGIN_MS=${config.budgetMarginMs}` +
        `${config.maxDurationMs === undefined ? "" : `, capped by RELAY_MAX_DURATION_MS=${config.maxDurationMs}`}) ` +
        `cannot fit one round, which reserves ${reserve} ms (RELAY_PUBLISH_TIMEOUT_MS + 3 x ` +
        `RELAY_STATEMENT_TIMEOUT_MS${reserveAllowanceText(config, maxMessageBytes)}): set the Lambda timeout to at least ${minimumTimeoutS} s` +
        `${config.maxDurationMs === undefined ? "" : ` and RELAY_MAX_DURATION_MS to at least ${reserve}`}, ` +
        "or lower those timeouts",
    );
  }
  return now + budget;
}

/** Cold-start form of the same rule, for the one setting known without a context. */
export function checkMaxDuration(config: RelayConfig, maxMessageBytes = 0): void {
  const reserve = roundReserveMs(config.relay, maxMessageBytes);
  if (config.maxDurationMs !== undefined && config.maxDurationMs < reserve) {
    throw new ConfigError(
      `RELAY_MAX_DURATION_MS=${config.maxDurationMs} cannot fit one round, which reserves ${reserve} ms ` +
        `(RELAY_PUBLISH_TIMEOUT_MS + 3 x RELAY_STATEMENT_TIMEOUT_MS${reserveAllowanceText(config, maxMessageBytes)}): ` +
        "raise it or lower those timeouts",
    );
  }
}

function reserveAllowanceText(config: RelayConfig, maxMessageBytes: number): string {
  const allowanceMs = oversizeAllowanceMs(maxMessageBytes, config.relay.batchMaxBytes);
  return allowanceMs === 0
    ? ""
    : ` + 2 x ${allowanceMs} ms to load and send a ${maxMessageBytes}-byte payload`;
}

/**
 * The pool's client-side query timeout: past the longest statement the relay sends, the load that may take a
 * row past its budget (loadBudget.ts), so a slow but live load is ended by its server-side statement_timeout
 * (and recorded on its row), not by the client discarding the session.
 */
export function longestStatementMs(config: RelayConfig, maxMessageBytes: number): number {
  return config.relay.statementTimeoutMs + oversizeAllowanceMs(maxMessageBytes, config.relay.batchMaxBytes);
}

/**
 * An invocation made no progress when it published nothing although it found work: every round failed as a
 * whole (database unreachable, timed out), some rounds failed while events were pending and the others claimed
 * nothing, or every event it claimed failed without being settled as a dead letter (SQS unreachable, throttled,
 * SendMessage denied, KMS key disabled). Events dead-lettered for their own content are settled, not stuck: they
 * have their own metric and alarm. Returns the error to throw, or undefined.
 *
 * The middle case is the quiet stall of issue 21: one round's statement timed out while its backend kept the
 * claim's row locks, and the other loops' rounds "succeeded" claiming nothing (`rounds: 619, claimed: 0,
 * failedRounds: 3`). Idle rounds are no proof that nothing was waiting, so `pending` (sql/pendingEvents.ts,
 * asked only in this case) decides; when it is unknown (undefined) a failed round counts.
 */
export function noProgressError(summary: RelaySummary, pending?: boolean) {
  if (summary.published > 0) return undefined;
  if (summary.rounds === 0 && summary.failedRounds > 0) {
    return new NoProgressError(
      `relay made no progress: all ${summary.failedRounds} round(s) failed; last error: ${summary.lastError}`,
    );
  }
  // Both causes are named when both happened: a round that timed out under load must not hide the publish
  // error (KMS key disabled, SendMessage denied) that the operator has to fix.
  const stuck = summary.failed - summary.deadLettered;
  const publishCause =
    stuck > 0
      ? `${stuck} publish attempt(s) failed and no event was published; ` +
        `last publish error: ${summary.lastPublishError ?? summary.lastError ?? "unknown"}`
      : undefined;
  if (summary.failedRounds > 0 && pending !== false) {
    return new NoProgressError(
      `relay made no progress: ${summary.failedRounds} round(s) failed and the other ${summary.rounds} ` +
        `published nothing while events were pending; last error: ${summary.lastError}` +
        (publishCause === undefined ? "" : `; ${publishCause}`),
    );
  }
  if (publishCause !== undefined) return new NoProgressError(`relay made no progress: ${publishCause}`);
  return undefined;
}

/** How the destination's client is sized and bounded: a socket per request in flight, the publish timeout. */
export function destinationClientOptions(
  config: RelayConfig,
): Pick<DestinationClientOptions, "sockets" | "requestTimeoutMs" | "claimCheck"> {
  return {
    sockets: config.relay.concurrency * config.relay.parallelRounds,
    requestTimeoutMs: config.relay.publishTimeoutMs,
    ...(config.claimCheck === undefined ? {} : { claimCheck: config.claimCheck }),
  };
}

/**
 * The Lambda's form of checkDestination: once per container, on the first invocation (a check at init would count
 * against Lambda's 10 s init limit); a check that throws is made again by the next invocation, so a fixed
 * destination is picked up. The returned function runs one invocation's `relay` after the check, or beside it
 * (relayBesideCheck). `timeoutMs` fixes the check's bound (the CLI's); else it is checkTimeoutMs of the deadline.
 */
export function destinationCheckOnce(
  destination: Destination,
  logger: Logger,
  timeoutMs?: number,
): <T>(deadline: number, relay: (signal?: AbortSignal) => Promise<T>, signal?: AbortSignal) => Promise<T> {
  let checked = false;
  return (deadline, relay, signal) => {
    if (checked) return relay(signal);
    const check = checkDestination(destination, logger, timeoutMs ?? checkTimeoutMs(deadline)).then(() => {
      checked = true;
    });
    return relayBesideCheck(destination, check, relay, signal);
  };
}

/**
 * Runs `relay` after the destination's start check, or beside it when the destination holds each place's sends
 * for that place's own check (`checkBesideRelaying`, a router): a silent route's check, waiting out its bound,
 * then does not hold the other routes' first rounds (issue 40, item 12). A check that throws (a route that can
 * never work: DESIGN invariant 6) still fails the invocation loudly: it stops the relay (no new rounds) and is
 * thrown once the round in progress has finished; meanwhile that route's events stay pending (router.ts).
 */
export async function relayBesideCheck<T>(
  destination: Destination,
  check: Promise<void>,
  relay: (signal?: AbortSignal) => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  if (destination.checkBesideRelaying !== true) {
    await check;
    return relay(signal);
  }
  const stop = new AbortController();
  let failure: { error: unknown } | undefined;
  const checking = check.catch((error: unknown) => {
    failure = { error };
    stop.abort();
  });
  const result = await relay(
    signal === undefined ? stop.signal : AbortSignal.any([signal, stop.signal]),
  ).finally(() => checking);
  await checking;
  if (failure !== undefined) throw failure.error;
  return result;
}

/** The destination check's own bound: within the invocation's budget, so an unreachable endpoint fails first. */
function checkTimeoutMs(deadline: number, now = Date.now()): number {
  return Math.max(1_000, Math.min(15_000, deadline - now));
}
