import { type DatabaseSource, databaseSourceFromEnv } from "../db/connection.ts";
import { type DestinationSetting, destinationSettingFromEnv } from "../destinations/setting.ts";
import { outboxLocationFromEnv } from "../outbox/names.ts";
import { boolean, integer, oneOf, optionalString } from "../util/env.ts";
import {
  DEFAULT_RELAY_OPTIONS,
  MAX_BATCH_MAX_BYTES,
  type RelayOptions,
  validateRelayOptions,
} from "./engine.ts";

type Env = Record<string, string | undefined>;

export interface RelayConfig {
  database: DatabaseSource;
  /** OUTBOX_QUEUE_URL or OUTBOX_EVENT_BUS_NAME: exactly one. */
  destination: DestinationSetting;
  relay: RelayOptions;
  /** Stop claiming this long before the Lambda deadline. */
  budgetMarginMs: number;
  /** Optional cap on one invocation's dwell time (default: until the deadline minus the margin). */
  maxDurationMs?: number;
  /** Wake the dwell loop with LISTEN/NOTIFY (needs the notify trigger; pins RDS Proxy sessions). */
  listen: boolean;
}

/** Reads and validates the relay's environment once, at cold start; every error names its variable. */
export function relayConfigFromEnv(env: Env): RelayConfig {
  // First, as OUTBOX_QUEUE_URL was: with nothing configured, the first error names where to publish.
  const destination = destinationSettingFromEnv(env);
  const d = DEFAULT_RELAY_OPTIONS;
  const maxDuration = optionalString(env, "RELAY_MAX_DURATION_MS");
  const relay: RelayOptions = {
    ...outboxLocationFromEnv(env),
    batchSize: integer(env, "RELAY_BATCH_SIZE", d.batchSize, 1, 1000),
    concurrency: integer(env, "RELAY_CONCURRENCY", d.concurrency, 1, 100),
    maxAttempts: integer(env, "RELAY_MAX_ATTEMPTS", d.maxAttempts, 1, 1000),
    backoffBaseMs: integer(env, "RELAY_BACKOFF_BASE_MS", d.backoffBaseMs, 1, 86_400_000),
    backoffMaxMs: integer(env, "RELAY_BACKOFF_MAX_MS", d.backoffMaxMs, 1, 86_400_000),
    strictOrder: boolean(env, "RELAY_STRICT_ORDER", d.strictOrder),
    batchMaxBytes: integer(env, "RELAY_BATCH_MAX_BYTES", d.batchMaxBytes, 1024, MAX_BATCH_MAX_BYTES),
    mode: oneOf(env, "RELAY_MODE", ["dwell", "drain"], d.mode),
    publishTimeoutMs: integer(env, "RELAY_PUBLISH_TIMEOUT_MS", d.publishTimeoutMs, 100, 900_000),
    statementTimeoutMs: integer(env, "RELAY_STATEMENT_TIMEOUT_MS", d.statementTimeoutMs, 100, 900_000),
    idlePollMinMs: integer(env, "RELAY_IDLE_POLL_MIN_MS", d.idlePollMinMs, 1, 60_000),
    idlePollMaxMs: integer(env, "RELAY_IDLE_POLL_MAX_MS", d.idlePollMaxMs, 1, 60_000),
    parallelRounds: integer(env, "RELAY_PARALLEL_ROUNDS", d.parallelRounds, 1, 16),
  };
  validateRelayOptions(relay);
  return {
    database: databaseSourceFromEnv(env),
    destination,
    relay,
    budgetMarginMs: integer(env, "RELAY_BUDGET_MARGIN_MS", 5_000, 0, 600_000),
    ...(maxDuration === undefined
      ? {}
      : { maxDurationMs: integer(env, "RELAY_MAX_DURATION_MS", 0, 1_000, 900_000) }),
    listen: boolean(env, "RELAY_LISTEN", false),
  };
}
