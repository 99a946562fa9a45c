import { type DatabaseSource, databaseSourceFromEnv } from "../db/connection.ts";
import { type RouteTable, routeTableFromEnv } from "../destinations/routing/table.ts";
import type { TargetSetting } from "../destinations/targets.ts";
import { outboxLocationFromEnv } from "../outbox/names.ts";
import type { Env } from "../util/env.ts";
import { integerSetting, readInteger } from "../util/settings.ts";
import {
  DEFAULT_PURGE_OPTIONS,
  PURGE_OPTION_LIMITS,
  type PurgeOptions,
  validatePurgeOptions,
} from "./purge.ts";

const d = DEFAULT_PURGE_OPTIONS;
const limits = PURGE_OPTION_LIMITS;

/**
 * What may still run after the purge's deadline (the Lambda's minus this margin). runPurge starts a batch only
 * if one statement_timeout fits before the deadline, but a batch is more than its statement: the client gives
 * the server's statement_timeout a second more (queryTimeoutFor), a session lost meanwhile is reopened (up to
 * CONNECT_TIMEOUT_MS, 5 s), and COMMIT, the summary line and the EMF flush (PurgeErrors, PurgedRows) follow.
 * The relay gets the same room as its margin (5 s) plus HANDLER_SLACK_MS (5 s), which infra/relayTiming.ts adds
 * to its timeout; the purge's timeout is fixed (5 minutes, or its interval), so its margin alone holds both.
 */
const PURGE_BUDGET_MARGIN_MS = 10_000;

/**
 * The purge's settings: what the Lambda reads from its environment, the CDK construct writes and the CLI's
 * flags fall back to. Defaults and limits are runPurge's own (purge.ts says why).
 */
export const PURGE_SETTINGS = {
  retentionHours: integerSetting({
    env: "PURGE_RETENTION_HOURS",
    default: d.retentionHours,
    ...limits.retentionHours,
    doc: "published rows are kept this long after publication",
  }),
  deadLetterRetentionHours: integerSetting({
    env: "PURGE_DEAD_LETTER_RETENTION_HOURS",
    default: undefined,
    ...limits.deadLetterRetentionHours,
    doc: "dead letters older than this are deleted; unset keeps them until an operator acts",
  }),
  batchSize: integerSetting({
    env: "PURGE_BATCH_SIZE",
    default: d.batchSize,
    ...limits.batchSize,
    doc: "rows per DELETE statement",
  }),
  statementTimeoutMs: integerSetting({
    env: "PURGE_STATEMENT_TIMEOUT_MS",
    default: d.statementTimeoutMs,
    ...limits.statementTimeoutMs,
    doc: "statement_timeout of each statement; also the time a batch must have left to start",
  }),
  pausePercent: integerSetting({
    env: "PURGE_PAUSE_PERCENT",
    default: d.pausePercent,
    ...limits.pausePercent,
    doc: "after each full batch, pause this percentage of the time it took (0: flat out)",
  }),
  budgetMarginMs: integerSetting({
    env: "PURGE_BUDGET_MARGIN_MS",
    default: PURGE_BUDGET_MARGIN_MS,
    min: 0,
    max: 600_000,
    doc: "stop starting batches this long (plus one statement timeout) before the Lambda deadline",
  }),
} as const;

export interface PurgeConfig {
  database: DatabaseSource;
  purge: PurgeOptions;
  /** Stop starting batches this long (plus one statement timeout) before the Lambda deadline. */
  budgetMarginMs: number;
  /**
   * The relay's route table (OUTBOX_ROUTES and its default, which the construct gives the purge too): the
   * snapshot reports the backlog per destination by it. Names only: the purge publishes nothing.
   */
  routes?: RouteTable<TargetSetting>;
}

/** Reads and validates the purge's environment once, at cold start; every error names its variable. */
export function purgeConfigFromEnv(env: Env): PurgeConfig {
  const s = PURGE_SETTINGS;
  const purge: PurgeOptions = {
    ...outboxLocationFromEnv(env),
    retentionHours: readInteger(env, s.retentionHours),
    deadLetterRetentionHours: readInteger(env, s.deadLetterRetentionHours) ?? null,
    batchSize: readInteger(env, s.batchSize),
    statementTimeoutMs: readInteger(env, s.statementTimeoutMs),
    pausePercent: readInteger(env, s.pausePercent),
  };
  validatePurgeOptions(purge);
  const routes = routeTableFromEnv(env);
  return {
    ...(routes === undefined ? {} : { routes }),
    database: databaseSourceFromEnv(env),
    purge,
    budgetMarginMs: readInteger(env, s.budgetMarginMs),
  };
}
