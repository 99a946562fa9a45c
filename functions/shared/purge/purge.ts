import { checkRolesHere } from "../db/rolesHere.ts";
import { type SessionClient, type SessionPool, withTransaction } from "../db/session.ts";
import { errorMessage } from "../outbox/errors.ts";
import { type OutboxLocation, outboxNames } from "../outbox/names.ts";
import { checkIntegerOption } from "../util/env.ts";
import type { Logger } from "../util/logger.ts";
import { sleep } from "../util/sleep.ts";
import { purgeCutoffs, purgeDeadLetters, purgePublished } from "./sql/purgePublished.ts";

export interface PurgeOptions extends OutboxLocation {
  /** Published rows are kept this long after publication (processed_at). */
  retentionHours: number;
  /** Dead letters are kept this long after dead-lettering; null keeps them until an operator acts. */
  deadLetterRetentionHours: number | null;
  /** Rows deleted per statement (1-50,000). */
  batchSize: number;
  /** statement_timeout of each statement; also the budget a batch must have left to start. */
  statementTimeoutMs: number;
  /** After each full batch, pause this percentage of the time the batch took (0 = flat out). */
  pausePercent: number;
}

export const DEFAULT_PURGE_OPTIONS = {
  // A week of published rows to look back at when a consumer reports a problem.
  retentionHours: 168,
  deadLetterRetentionHours: null,
  // 5,000 rows took ~9 ms a statement purging 1M rows (Postgres 17, 2 cores): short enough that no statement
  // holds its locks for long, big enough that a million rows are 200 statements.
  batchSize: 5_000,
  statementTimeoutMs: 10_000,
  // A purge flat out keeps one database core busy (~330k rows/s), taken from the relay on a small instance:
  // relay throughput fell to 0.66x during a 1M-row purge on 2 cores. Pausing as long as each batch took halves
  // the purge's CPU and still deletes ~190k rows/s (bench (7), docs/benchmarks.md).
  pausePercent: 100,
} as const satisfies Omit<PurgeOptions, keyof OutboxLocation>;

export interface PurgeDeps {
  pool: SessionPool;
  /** Epoch milliseconds by which runPurge must have returned (Lambda deadline minus a safety margin). */
  deadline: number;
  logger?: Logger;
  /** Stop between batches (SIGTERM, Ctrl-C); the statement in progress finishes. */
  signal?: AbortSignal;
  now?: () => number;
  /** The pause between batches (tests replace it to observe the pacing). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export interface PurgeSummary {
  /** Published rows deleted. */
  deletedRows: number;
  /** Dead letters deleted (only with a dead-letter retention). */
  deletedDeadLetters: number;
  /** DELETE statements run, each deleting at most batchSize rows. */
  batches: number;
  durationMs: number;
  /** `error`: a statement failed (timeout, connection lost); what it would have deleted is still there. */
  stoppedBy: "drained" | "deadline" | "signal" | "error";
  error?: string;
}

export const MAX_RETENTION_HOURS = 87_600; // ten years

/** The accepted range of each numeric option, from code or from the environment (settings.ts's table). */
export const PURGE_OPTION_LIMITS = {
  retentionHours: { min: 1, max: MAX_RETENTION_HOURS },
  deadLetterRetentionHours: { min: 1, max: MAX_RETENTION_HOURS },
  batchSize: { min: 1, max: 50_000 },
  statementTimeoutMs: { min: 100, max: 900_000 },
  pausePercent: { min: 0, max: 1_000 },
} as const satisfies Partial<Record<keyof PurgeOptions, { min: number; max: number }>>;

export function validatePurgeOptions(options: PurgeOptions): PurgeOptions {
  for (const [name, { min, max }] of Object.entries(PURGE_OPTION_LIMITS)) {
    const value = options[name as keyof typeof PURGE_OPTION_LIMITS];
    // A null dead-letter retention keeps dead letters; every other option is required.
    if (value !== null || name !== "deadLetterRetentionHours") checkIntegerOption(name, value, min, max);
  }
  outboxNames(options);
  return options;
}

/**
 * Deletes published rows older than the retention, then (if configured) old dead letters, one bounded
 * statement per batch, until none is left, the budget ends, or a stop is requested. Pending rows are never
 * read or locked, so the relay runs at full speed alongside (see sql/purgePublished.ts for the statement).
 * A batch starts only if a whole statement_timeout fits before the deadline, so no statement outlives the
 * budget. A failed statement ends the run with `stoppedBy: "error"`: it rolled back, and the next run resumes.
 */
export async function runPurge(deps: PurgeDeps, options: PurgeOptions): Promise<PurgeSummary> {
  validatePurgeOptions(options);
  const now = deps.now ?? Date.now;
  const started = now();
  const names = outboxNames(options);
  const summary: PurgeSummary = {
    deletedRows: 0,
    deletedDeadLetters: 0,
    batches: 0,
    durationMs: 0,
    stoppedBy: "drained",
  };
  try {
    // A clone or a restore not yet migrated names another database's roles: refused (db/rolesHere.ts).
    const cutoffs = await inShortTransaction(deps.pool, options, async (client) => {
      await checkRolesHere(client, names);
      return purgeCutoffs(client, options);
    });
    const phases = [
      { before: cutoffs.publishedBefore, purge: purgePublished, count: "deletedRows" as const },
      { before: cutoffs.deadLettersBefore, purge: purgeDeadLetters, count: "deletedDeadLetters" as const },
    ];
    for (const phase of phases) {
      const { before } = phase;
      if (before === null) continue;
      for (;;) {
        const stop = stopReason(deps, options, now);
        if (stop !== undefined) {
          summary.stoppedBy = stop;
          return finish(summary, started, now);
        }
        const batchStarted = now();
        const deleted = await inShortTransaction(deps.pool, options, (client) =>
          phase.purge(client, names, { before, limit: options.batchSize }),
        );
        summary.batches++;
        summary[phase.count] += deleted;
        if (deleted < options.batchSize) break;
        // Never past the deadline: a slow batch at a high pausePercent would otherwise sleep beyond the budget
        // margin, into the Lambda's timeout.
        const pauseMs = Math.min(
          ((now() - batchStarted) * options.pausePercent) / 100,
          deps.deadline - now(),
        );
        if (pauseMs >= 1) await (deps.sleep ?? sleep)(pauseMs, deps.signal);
      }
    }
  } catch (error) {
    summary.stoppedBy = "error";
    summary.error = errorMessage(error);
    deps.logger?.error("purge statement failed; the next run resumes where this one stopped", {
      error: summary.error,
      deletedRows: summary.deletedRows,
      deletedDeadLetters: summary.deletedDeadLetters,
    });
  }
  return finish(summary, started, now);
}

function stopReason(deps: PurgeDeps, options: PurgeOptions, now: () => number) {
  if (deps.signal?.aborted) return "signal" as const;
  if (deps.deadline - now() < options.statementTimeoutMs) return "deadline" as const;
  return undefined;
}

function finish(summary: PurgeSummary, started: number, now: () => number): PurgeSummary {
  summary.durationMs = now() - started;
  return summary;
}

/**
 * Transaction-local timeouts (set_config(..., true)), so a pooled or RDS Proxy session is left as it was.
 * statement_timeout also bounds a wait for the table lock (behind a migration's ACCESS EXCLUSIVE); the idle
 * timeout ends the session if this process freezes between the statement and its commit.
 */
function inShortTransaction<T>(
  pool: SessionPool,
  options: PurgeOptions,
  work: (client: SessionClient) => Promise<T>,
): Promise<T> {
  return withTransaction(pool, work, {
    statementTimeoutMs: options.statementTimeoutMs,
    idleInTransactionMs: options.statementTimeoutMs,
  });
}
