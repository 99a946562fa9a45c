import { type DatabaseSource, databaseSourceFromEnv } from "../db/connection.ts";
import { type ClaimCheckSetting, claimCheckSettingFromEnv } from "../destinations/claimCheck/settings.ts";
import { type DestinationSetting, destinationSettingFromEnv } from "../destinations/setting.ts";
import { outboxLocationFromEnv } from "../outbox/names.ts";
import type { Env } from "../util/env.ts";
import {
  booleanSetting,
  choiceSetting,
  integerSetting,
  readBoolean,
  readChoice,
  readInteger,
} from "../util/settings.ts";
import {
  DEFAULT_RELAY_OPTIONS,
  RELAY_OPTION_LIMITS,
  type RelayOptions,
  validateRelayOptions,
} from "./engine.ts";
import { HANDOVER_PROVING_MS } from "./handover.ts";

const d = DEFAULT_RELAY_OPTIONS;
const limits = RELAY_OPTION_LIMITS;

/**
 * The relay's settings: what the Lambda reads from its environment, the CDK construct writes and the CLI's
 * flags fall back to. Defaults and limits are the engine's own (engine.ts says why each is what it is). The
 * destination (destinations/setting.ts), the database (db/settings.ts), the outbox's location
 * (outbox/settings.ts) and the metrics (observe/settings.ts) have tables of their own.
 */
export const RELAY_SETTINGS = {
  mode: choiceSetting({
    env: "RELAY_MODE",
    default: d.mode,
    choices: ["dwell", "drain"],
    doc: "dwell: poll until the time budget ends; drain: stop when nothing is claimable",
  }),
  batchSize: integerSetting({
    env: "RELAY_BATCH_SIZE",
    default: d.batchSize,
    ...limits.batchSize,
    doc: "rows claimed per round",
  }),
  concurrency: integerSetting({
    env: "RELAY_CONCURRENCY",
    default: d.concurrency,
    ...limits.concurrency,
    doc: "SendMessageBatch / PutEvents requests in flight per round",
  }),
  maxAttempts: integerSetting({
    env: "RELAY_MAX_ATTEMPTS",
    default: d.maxAttempts,
    ...limits.maxAttempts,
    doc: "rejected tries before a dead letter",
  }),
  backoffBaseMs: integerSetting({
    env: "RELAY_BACKOFF_BASE_MS",
    default: d.backoffBaseMs,
    ...limits.backoffBaseMs,
    doc: "first retry delay after a failed publish; doubles per attempt",
  }),
  backoffMaxMs: integerSetting({
    env: "RELAY_BACKOFF_MAX_MS",
    default: d.backoffMaxMs,
    ...limits.backoffMaxMs,
    doc: "longest retry delay (at least RELAY_BACKOFF_BASE_MS)",
  }),
  strictOrder: booleanSetting({
    env: "RELAY_STRICT_ORDER",
    default: d.strictOrder,
    doc: "a dead letter blocks the rest of its aggregate instead of being parked",
  }),
  batchMaxBytes: integerSetting({
    env: "RELAY_BATCH_MAX_BYTES",
    default: d.batchMaxBytes,
    ...limits.batchMaxBytes,
    doc: "payload bytes one round loads at most; bounds a round's memory",
  }),
  publishTimeoutMs: integerSetting({
    env: "RELAY_PUBLISH_TIMEOUT_MS",
    default: d.publishTimeoutMs,
    ...limits.publishTimeoutMs,
    doc: "upper bound on one round's publishing",
  }),
  statementTimeoutMs: integerSetting({
    env: "RELAY_STATEMENT_TIMEOUT_MS",
    default: d.statementTimeoutMs,
    ...limits.statementTimeoutMs,
    doc: "statement_timeout of the claim, load and record statements",
  }),
  idlePollMinMs: integerSetting({
    env: "RELAY_IDLE_POLL_MIN_MS",
    default: d.idlePollMinMs,
    ...limits.idlePollMinMs,
    doc: "dwell mode: first idle poll delay after a busy round",
  }),
  idlePollMaxMs: integerSetting({
    env: "RELAY_IDLE_POLL_MAX_MS",
    default: d.idlePollMaxMs,
    ...limits.idlePollMaxMs,
    doc: "dwell mode: longest idle poll delay (at least RELAY_IDLE_POLL_MIN_MS)",
  }),
  parallelRounds: integerSetting({
    env: "RELAY_PARALLEL_ROUNDS",
    default: d.parallelRounds,
    ...limits.parallelRounds,
    doc: "rounds in flight at once, each on its own database session",
  }),
  budgetMarginMs: integerSetting({
    env: "RELAY_BUDGET_MARGIN_MS",
    default: 5_000,
    min: 0,
    max: 600_000,
    doc: "stop claiming this long before the Lambda deadline",
  }),
  maxDurationMs: integerSetting({
    env: "RELAY_MAX_DURATION_MS",
    default: undefined,
    min: 1_000,
    max: 900_000,
    doc: "cap on one invocation's dwell; unset: until the deadline minus the margin",
  }),
  retention: choiceSetting({
    env: "OUTBOX_RETENTION",
    default: d.retention,
    choices: ["keep", "delete"],
    doc: "keep: mark published rows, the purge deletes them later; delete: delete them as they are published",
  }),
  idleStopMs: integerSetting({
    env: "RELAY_IDLE_STOP_MS",
    default: undefined,
    min: 1_000,
    max: 900_000,
    doc: "dwell mode: return after this long without a claimed event (the next tick resumes); unset: never",
  }),
  handoverProvingMs: integerSetting({
    env: "RELAY_HANDOVER_PROVING_MS",
    default: HANDOVER_PROVING_MS,
    min: 0,
    max: 60_000,
    doc: "dwell mode: a new invocation takes its slot over only after claiming this long without a failed round",
  }),
  listen: booleanSetting({
    env: "RELAY_LISTEN",
    default: false,
    doc: "wake the dwell loop with LISTEN/NOTIFY (needs the notify trigger; pins RDS Proxy sessions)",
  }),
} as const;

export interface RelayConfig {
  database: DatabaseSource;
  /** OUTBOX_QUEUE_URL or OUTBOX_EVENT_BUS_NAME: exactly one. */
  destination: DestinationSetting;
  relay: RelayOptions;
  /** Stop claiming this long before the Lambda deadline. */
  budgetMarginMs: number;
  /** Optional cap on one invocation's dwell time (default: until the deadline minus the margin). */
  maxDurationMs?: number;
  /** Dwell mode: return after this long without a claimed event; the next tick resumes. Unset: never. */
  idleStopMs?: number;
  /**
   * Dwell mode: how long a new invocation claims, without a failed round, before it takes its relay slot over
   * from the one before (handover.ts); 0: at its first completed round.
   */
  handoverProvingMs: number;
  /** Wake the dwell loop with LISTEN/NOTIFY (needs the notify trigger; pins RDS Proxy sessions). */
  listen: boolean;
  /** Payloads too large for the destination go through S3 (OUTBOX_PAYLOAD_BUCKET); absent: off. */
  claimCheck?: ClaimCheckSetting;
}

/** Reads and validates the relay's environment once, at cold start; every error names its variable. */
export function relayConfigFromEnv(env: Env): RelayConfig {
  // First, as OUTBOX_QUEUE_URL was: with nothing configured, the first error names where to publish.
  const destination = destinationSettingFromEnv(env);
  const s = RELAY_SETTINGS;
  const relay: RelayOptions = {
    ...outboxLocationFromEnv(env),
    batchSize: readInteger(env, s.batchSize),
    concurrency: readInteger(env, s.concurrency),
    maxAttempts: readInteger(env, s.maxAttempts),
    backoffBaseMs: readInteger(env, s.backoffBaseMs),
    backoffMaxMs: readInteger(env, s.backoffMaxMs),
    strictOrder: readBoolean(env, s.strictOrder),
    batchMaxBytes: readInteger(env, s.batchMaxBytes),
    mode: readChoice(env, s.mode),
    publishTimeoutMs: readInteger(env, s.publishTimeoutMs),
    statementTimeoutMs: readInteger(env, s.statementTimeoutMs),
    idlePollMinMs: readInteger(env, s.idlePollMinMs),
    idlePollMaxMs: readInteger(env, s.idlePollMaxMs),
    parallelRounds: readInteger(env, s.parallelRounds),
    retention: readChoice(env, s.retention),
  };
  validateRelayOptions(relay);
  const database = databaseSourceFromEnv(env);
  const budgetMarginMs = readInteger(env, s.budgetMarginMs);
  const maxDurationMs = readInteger(env, s.maxDurationMs);
  const idleStopMs = readInteger(env, s.idleStopMs);
  const claimCheck = claimCheckSettingFromEnv(env);
  return {
    database,
    destination,
    relay,
    budgetMarginMs,
    ...(maxDurationMs === undefined ? {} : { maxDurationMs }),
    ...(idleStopMs === undefined ? {} : { idleStopMs }),
    handoverProvingMs: readInteger(env, s.handoverProvingMs),
    listen: readBoolean(env, s.listen),
    ...(claimCheck === undefined ? {} : { claimCheck }),
  };
}
