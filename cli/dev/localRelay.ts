/**
 * The relay and the purge as `outbox dev` and `npm start` run them on one machine: the Lambda's engine
 * (cli/relayLoop.ts, dwell mode), its settings from the environment as the Lambda reads them, and a failure
 * backoff capped at 2 s (default 5 min), so the end of an endpoint outage shows up in seconds rather than minutes.
 */

import type { SessionPool } from "../../functions/shared/db/session.ts";
import { errorMessage } from "../../functions/shared/outbox/errors.ts";
import { runPurge } from "../../functions/shared/purge/purge.ts";
import { type PurgeConfig, purgeConfigFromEnv } from "../../functions/shared/purge/settings.ts";
import { roundReserveMs } from "../../functions/shared/relay/engine.ts";
import type { RelayConfig } from "../../functions/shared/relay/settings.ts";
import type { Env } from "../../functions/shared/util/env.ts";
import type { Logger } from "../../functions/shared/util/logger.ts";

/** Relay settings for local runs, unless the environment sets them. */
export const LOCAL_RELAY_ENV: Env = {
  RELAY_BACKOFF_MAX_MS: "2000",
};

/**
 * One relay "invocation", like a scheduled Lambda with a 60 s timeout: with the default timeouts a round reserves
 * 25 s (publish + 3 x statement timeout), so each invocation dwells for 35 s and the next one starts at once.
 */
export const LOCAL_INVOCATION_SECONDS = 60;

/**
 * The same, grown by the claim check's load allowance when it is on (engine.ts roundReserveMs: tens of seconds
 * at 64 MiB), so each invocation still dwells for 35 s.
 */
export function localInvocationMs(config: RelayConfig): number {
  const allowanceMs =
    roundReserveMs(config.relay, config.claimCheck?.maxPayloadBytes ?? 0) - roundReserveMs(config.relay);
  return LOCAL_INVOCATION_SECONDS * 1000 + allowanceMs;
}

/** The purge Lambda runs hourly; locally every 5 minutes, so a day-long session sees its retention applied. */
export const PURGE_EVERY_MS = 5 * 60_000;
const PURGE_BUDGET_MS = 60_000;

/** The purge on a timer; returns the stop, which waits for a purge in progress. */
export function startPurgeTimer(pool: SessionPool, env: Env, logger: Logger): () => Promise<void> {
  const config: PurgeConfig = purgeConfigFromEnv(env);
  const stop = new AbortController();
  let running: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    running = runPurge(
      { pool, deadline: Date.now() + PURGE_BUDGET_MS, logger, signal: stop.signal },
      config.purge,
    ).catch((error: unknown) => logger.warn("purge failed", { error: errorMessage(error) }));
  }, PURGE_EVERY_MS);
  timer.unref();
  return async () => {
    clearInterval(timer);
    stop.abort();
    await running;
  };
}
