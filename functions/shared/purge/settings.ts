import { type DatabaseSource, databaseSourceFromEnv } from "../db/connection.ts";
import { outboxLocationFromEnv } from "../outbox/names.ts";
import { integer, optionalString } from "../util/env.ts";
import {
  DEFAULT_PURGE_OPTIONS,
  MAX_RETENTION_HOURS,
  type PurgeOptions,
  validatePurgeOptions,
} from "./purge.ts";

type Env = Record<string, string | undefined>;

export interface PurgeConfig {
  database: DatabaseSource;
  purge: PurgeOptions;
  /** Stop starting batches this long (plus one statement timeout) before the Lambda deadline. */
  budgetMarginMs: number;
}

/** Reads and validates the purge's environment once, at cold start; every error names its variable. */
export function purgeConfigFromEnv(env: Env): PurgeConfig {
  const d = DEFAULT_PURGE_OPTIONS;
  // Unset (the default) keeps dead letters until an operator replays or deletes them.
  const deadLetterRetention = optionalString(env, "PURGE_DEAD_LETTER_RETENTION_HOURS");
  const purge: PurgeOptions = {
    ...outboxLocationFromEnv(env),
    retentionHours: integer(env, "PURGE_RETENTION_HOURS", d.retentionHours, 1, MAX_RETENTION_HOURS),
    deadLetterRetentionHours:
      deadLetterRetention === undefined
        ? null
        : integer(env, "PURGE_DEAD_LETTER_RETENTION_HOURS", 0, 1, MAX_RETENTION_HOURS),
    batchSize: integer(env, "PURGE_BATCH_SIZE", d.batchSize, 1, 50_000),
    statementTimeoutMs: integer(env, "PURGE_STATEMENT_TIMEOUT_MS", d.statementTimeoutMs, 100, 900_000),
    pausePercent: integer(env, "PURGE_PAUSE_PERCENT", d.pausePercent, 0, 1_000),
  };
  validatePurgeOptions(purge);
  return {
    database: databaseSourceFromEnv(env),
    purge,
    budgetMarginMs: integer(env, "PURGE_BUDGET_MARGIN_MS", 5_000, 0, 600_000),
  };
}
