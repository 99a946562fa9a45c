import { INBOX_METRIC } from "../observe/metricNames.ts";
import { errorMessage } from "../outbox/errors.ts";
import type { InboxLogger } from "./inboxLogger.ts";

export type OutcomeStatus = "processed" | "duplicate" | "stale" | "ignored" | "failed" | "skipped";

/**
 * The part of Powertools Metrics (`@aws-lambda-powertools/metrics`) the inbox uses, structurally, so the
 * package's types do not force a Powertools version on the consumer: a `new Metrics({ namespace, serviceName })`
 * fits.
 */
export interface InboxMetrics {
  addMetric(name: string, unit: "Count", value: number): unknown;
  publishStoredMetrics(): unknown;
}

/** Metric names by outcome: `InboxRecords` + the status. The construct alarms on InboxRecordsFailed. */
export const OUTCOME_METRIC: Record<OutcomeStatus, string> = INBOX_METRIC;

/**
 * One EMF line per invocation with every outcome's count, zeros included: a zero is a data point, so an alarm
 * on InboxRecordsFailed sees a healthy consumer as 0 rather than as missing data. Published here, not left to
 * a middleware the user may not have: a count that is never flushed would leave the alarm blind. Errors of the
 * metrics backend are logged and never change an outcome.
 */
export function publishOutcomeCounts(
  metrics: InboxMetrics,
  counts: Record<OutcomeStatus, number>,
  logger: InboxLogger,
): void {
  try {
    for (const [status, name] of Object.entries(OUTCOME_METRIC) as [OutcomeStatus, string][]) {
      metrics.addMetric(name, "Count", counts[status]);
    }
    metrics.publishStoredMetrics();
  } catch (error) {
    logger.error("publishing the inbox's metrics failed; outcomes stand", { error: errorMessage(error) });
  }
}
