import { ConfigError, OutboxError } from "../outbox/errors.ts";
import { type RelayLogger, type RelaySummary, roundReserveMs } from "./engine.ts";
import type { RelayConfig } from "./settings.ts";

/** The invocation did nothing useful while events were waiting: fail it, so Lambda's Errors metric alarms. */
export class NoProgressError extends OutboxError {
  override name = "NoProgressError";
}

/**
 * When one invocation must stop: the Lambda deadline minus RELAY_BUDGET_MARGIN_MS, capped by
 * RELAY_MAX_DURATION_MS. A round starts only if roundReserveMs fits before it, so a budget below that would
 * return `rounds: 0` forever, quietly: it throws a ConfigError naming the settings and the minimum instead.
 * Checked on every invocation, because the Lambda timeout is only known from the context (Lambda exposes no
 * variable for it), and each invocation gets the whole timeout.
 */
export function invocationDeadline(config: RelayConfig, now: number, remainingMs: number): number {
  const reserve = roundReserveMs(config.relay);
  const budget = Math.min(
    remainingMs - config.budgetMarginMs,
    config.maxDurationMs ?? Number.POSITIVE_INFINITY,
  );
  if (budget < reserve) {
    const minimumTimeoutS = Math.ceil((reserve + config.budgetMarginMs) / 1000);
    throw new ConfigError(
      `the invocation's time budget (${budget} ms: ${remainingMs} ms left of the Lambda timeout minus ` +
        `RELAY_BUDGET_MARGIN_MS=${config.budgetMarginMs}` +
        `${config.maxDurationMs === undefined ? "" : `, capped by RELAY_MAX_DURATION_MS=${config.maxDurationMs}`}) ` +
        `cannot fit one round, which reserves ${reserve} ms (RELAY_PUBLISH_TIMEOUT_MS + 3 x ` +
        `RELAY_STATEMENT_TIMEOUT_MS): set the Lambda timeout to at least ${minimumTimeoutS} s` +
        `${config.maxDurationMs === undefined ? "" : ` and RELAY_MAX_DURATION_MS to at least ${reserve}`}, ` +
        "or lower those timeouts",
    );
  }
  return now + budget;
}

/** Cold-start form of the same rule, for the one setting known without a context. */
export function checkMaxDuration(config: RelayConfig): void {
  const reserve = roundReserveMs(config.relay);
  if (config.maxDurationMs !== undefined && config.maxDurationMs < reserve) {
    throw new ConfigError(
      `RELAY_MAX_DURATION_MS=${config.maxDurationMs} cannot fit one round, which reserves ${reserve} ms ` +
        "(RELAY_PUBLISH_TIMEOUT_MS + 3 x RELAY_STATEMENT_TIMEOUT_MS): raise it or lower those timeouts",
    );
  }
}

/**
 * Remembers the last publish failure the engine logged, so a failed invocation can name its cause (the
 * engine's summary keeps only whole-round errors).
 */
export class FailureRecorder implements RelayLogger {
  lastPublishError: string | undefined;
  readonly #logger: RelayLogger;
  constructor(logger: RelayLogger) {
    this.#logger = logger;
  }
  info(message: string, fields: Record<string, unknown>): void {
    this.#logger.info(message, fields);
  }
  warn(message: string, fields: Record<string, unknown>): void {
    this.#remember(fields);
    this.#logger.warn(message, fields);
  }
  error(message: string, fields: Record<string, unknown>): void {
    this.#remember(fields);
    this.#logger.error(message, fields);
  }
  #remember(fields: Record<string, unknown>) {
    if (typeof fields.error === "string" && typeof fields.eventId === "string")
      this.lastPublishError = fields.error;
  }
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
export function noProgressError(
  summary: RelaySummary,
  lastPublishError: string | undefined,
  pending?: boolean,
) {
  if (summary.published > 0) return undefined;
  if (summary.rounds === 0 && summary.failedRounds > 0) {
    return new NoProgressError(
      `relay made no progress: all ${summary.failedRounds} round(s) failed; last error: ${summary.lastError}`,
    );
  }
  if (summary.failedRounds > 0 && pending !== false) {
    return new NoProgressError(
      `relay made no progress: ${summary.failedRounds} round(s) failed and the other ${summary.rounds} ` +
        `published nothing while events were pending; last error: ${summary.lastError}`,
    );
  }
  const stuck = summary.failed - summary.deadLettered;
  if (stuck > 0) {
    return new NoProgressError(
      `relay made no progress: ${stuck} publish attempt(s) failed and no event was published; ` +
        `last error: ${lastPublishError ?? summary.lastError ?? "unknown"}`,
    );
  }
  return undefined;
}
