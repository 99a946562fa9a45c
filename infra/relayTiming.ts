import { DEFAULT_RELAY_OPTIONS, roundReserveMs } from "../functions/shared/relay.ts";

/** The relay handler's default `RELAY_BUDGET_MARGIN_MS` (functions/shared/relayConfig.ts). */
export const DEFAULT_BUDGET_MARGIN_MS = 5_000;

/**
 * Time the handler needs besides the dwell loop: the `relay finished` log line, the summary, Powertools' flush.
 * Measured in tens of milliseconds; 5 s leaves room for a slow log flush without ever cutting a round.
 */
export const HANDLER_SLACK_MS = 5_000;

/** Lambda's hard ceiling on one invocation. */
export const LAMBDA_MAX_TIMEOUT_SECONDS = 900;

export interface RelayTimingInput {
  /** Seconds between two scheduled invocations (EventBridge rates are whole minutes). */
  scheduleSeconds: number;
  publishTimeoutMs?: number;
  statementTimeoutMs?: number;
  budgetMarginMs?: number;
}

export interface RelayTiming {
  /** publishTimeout + 2 x statementTimeout: the relay starts a round only if this much is left. */
  roundReserveMs: number;
  /** RELAY_MAX_DURATION_MS: how long one invocation dwells. */
  maxDurationMs: number;
  /** The Lambda timeout. */
  timeoutSeconds: number;
  /** Invocations that can be running at once; the relay's reserved concurrency. */
  reservedConcurrency: number;
}

/**
 * Sizes the relay Lambda so that, in dwell mode, some invocation is always claiming rows (no minute without a
 * relay) while invocations never pile up. With the defaults (1-minute schedule, publish timeout 10 s, statement
 * timeout 5 s, margin 5 s):
 *
 * - A round needs a reserve of 10 + 2 x 5 = 20 s, so an invocation that dwells D seconds starts its last round
 *   at D - 20 s. For claiming to continue until the next tick (60 s later), D = 60 + 20 = 80 s
 *   (RELAY_MAX_DURATION_MS). A shorter D leaves a gap each minute in which new events wait for the next tick.
 * - The handler stops at min(start + D, deadline - margin). For D to be the binding limit, the timeout is
 *   D + margin + slack = 80 + 5 + 5 = 90 s. A round that starts at 60 s ends by 80 s at worst, well before 90 s.
 * - Invocation k runs in [60k, 60k + 90]: it overlaps the next one by at most 30 s and never the one after
 *   (90 < 120). So ceil(90 / 60) = 2 run at once at most: reserved concurrency 2 admits that one overlap, and a
 *   third invocation (something invoking the relay by hand, say) is throttled instead of piling up.
 *   Overlap is safe: rows are claimed with SKIP LOCKED and an aggregate's head is claimed by one relay only.
 */
export function relayTiming(input: RelayTimingInput): RelayTiming {
  const publishTimeoutMs = input.publishTimeoutMs ?? DEFAULT_RELAY_OPTIONS.publishTimeoutMs;
  const statementTimeoutMs = input.statementTimeoutMs ?? DEFAULT_RELAY_OPTIONS.statementTimeoutMs;
  const budgetMarginMs = input.budgetMarginMs ?? DEFAULT_BUDGET_MARGIN_MS;
  if (
    !Number.isInteger(input.scheduleSeconds) ||
    input.scheduleSeconds < 60 ||
    input.scheduleSeconds % 60 !== 0
  ) {
    throw new Error(`relay schedule must be a whole number of minutes, got ${input.scheduleSeconds} s`);
  }
  const reserveMs = roundReserveMs({
    ...DEFAULT_RELAY_OPTIONS,
    queueUrl: "",
    publishTimeoutMs,
    statementTimeoutMs,
  });
  const maxDurationMs = input.scheduleSeconds * 1000 + reserveMs;
  const timeoutSeconds = Math.ceil((maxDurationMs + budgetMarginMs + HANDLER_SLACK_MS) / 1000);
  if (timeoutSeconds > LAMBDA_MAX_TIMEOUT_SECONDS) {
    throw new Error(
      `relay timeout would be ${timeoutSeconds} s (schedule ${input.scheduleSeconds} s + round reserve ` +
        `${reserveMs} ms + margin ${budgetMarginMs} ms + slack): over Lambda's ${LAMBDA_MAX_TIMEOUT_SECONDS} s; ` +
        "use a shorter schedule or shorter publish/statement timeouts",
    );
  }
  return {
    roundReserveMs: reserveMs,
    maxDurationMs,
    timeoutSeconds,
    reservedConcurrency: Math.ceil(timeoutSeconds / input.scheduleSeconds),
  };
}
