import type { Metrics } from "@aws-lambda-powertools/metrics";
import type { SessionPool } from "../db/session.ts";
import { recordOutboxSnapshot, recordPurgeSummary, recordSnapshotError } from "../observe/metrics.ts";
import { readOutboxSnapshot } from "../observe/snapshot.ts";
import { MAX_PENDING_PAIRS } from "../observe/sql/pendingByRoute.ts";
import { errorMessage } from "../outbox/errors.ts";
import type { Logger } from "../util/logger.ts";
import { type PurgeSummary, runPurge } from "./purge.ts";
import type { PurgeConfig } from "./settings.ts";

export interface PurgeInvocationDeps {
  pool: SessionPool;
  metrics: Metrics;
  logger: Logger;
  /** Epoch milliseconds by which the purge returns (Lambda deadline minus PURGE_BUDGET_MARGIN_MS). */
  deadline: number;
}

/**
 * One purge invocation: report how the outbox stands (one line of metrics), then, unless `snapshotOnly`, delete
 * old published rows until none are left or the budget ends. The two are independent: a snapshot that fails or
 * times out does not skip the hour's purge, and a failing purge still reports the snapshot. Either failure is
 * counted (SnapshotErrors, PurgeErrors) and thrown at the end, so the invocation fails and Lambda's Errors
 * metric sees it too; the metrics stored so far are published all the same.
 */
export async function purgeInvocation(
  deps: PurgeInvocationDeps,
  config: PurgeConfig,
  snapshotOnly: boolean,
): Promise<PurgeSummary | { snapshotOnly: true }> {
  const { metrics, logger } = deps;
  const failures: string[] = [];
  // The snapshot first: the alarms depend on it, and it is bounded by the statement timeout. It reads only
  // unpublished rows, which the purge does not touch (dead letters aside, when their retention is set).
  const snapshot = await readOutboxSnapshot(deps.pool, { ...config.purge, routes: config.routes }).catch(
    (error: unknown) => {
      recordSnapshotError(metrics);
      failures.push(`outbox snapshot failed: ${errorMessage(error)}`);
      logger.error("outbox snapshot failed; its metrics are missing for this run", {
        error: errorMessage(error),
      });
      return undefined;
    },
  );
  if (snapshot !== undefined) recordOutboxSnapshot(metrics, snapshot);
  if (snapshot?.capped === true) {
    logger.warn(
      "too many (aggregate_type, event_type) pairs are pending: the per-destination PendingEvents count the " +
        "oldest pairs only (the outbox-wide figures are exact)",
      { maxPairs: MAX_PENDING_PAIRS },
    );
  }
  let result: PurgeSummary | { snapshotOnly: true };
  if (snapshotOnly) {
    logger.info("outbox snapshot", { snapshot });
    result = { snapshotOnly: true };
  } else {
    const summary = await runPurge({ pool: deps.pool, deadline: deps.deadline, logger }, config.purge);
    recordPurgeSummary(metrics, summary);
    logger.info("purge finished", { summary, snapshot });
    if (summary.stoppedBy === "error") failures.push(`purge stopped by an error: ${summary.error}`);
    result = summary;
  }
  if (failures.length > 0) throw new Error(failures.join("; "));
  return result;
}
