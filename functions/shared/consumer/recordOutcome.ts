import { errorMessage } from "../outbox/errors.ts";
import type { InboxEvent } from "./inboxEvent.ts";
import type { InboxLogger } from "./inboxLogger.ts";
import type { OutcomeStatus } from "./outcomeMetrics.ts";

/**
 * What became of each record, told once: counted for the invocation's metrics and handed to `onOutcome`. One
 * function does both so no path (processed, skipped by its group, cut by the deadline) can count without
 * telling or tell without counting.
 */

/** What became of one record; `onOutcome` receives each, for metrics or tests. */
export type RecordOutcome =
  | { status: "processed"; messageId: string; event: InboxEvent }
  /** This consumer's inbox already had the outbox id: nothing was run. */
  | { status: "duplicate"; messageId: string; event: InboxEvent }
  /**
   * `staleEvents: "skip"`: this consumer already applied an event of the aggregate with a higher (or this)
   * `seq`; acknowledged, nothing run.
   */
  | { status: "stale"; messageId: string; event: InboxEvent }
  /** Routes had no handler for its event type and `unknownEventTypes` is "ignore": recorded, nothing run. */
  | { status: "ignored"; messageId: string; event: InboxEvent }
  /** Parsing, the handler or the database failed: rolled back, reported for redelivery. */
  | { status: "failed"; messageId: string; event: InboxEvent | undefined; error: unknown }
  /**
   * Not run, reported for redelivery: an earlier record of its message group failed in this batch ("group"),
   * or the invocation had too little time left to start it ("deadline").
   */
  | { status: "skipped"; messageId: string; groupId: string; reason: "group" | "deadline" };

/** One invocation's tally: outcome counts, and the database failures that decide whether it failed as a whole. */
export interface BatchState {
  databaseFailures: unknown[];
  counts: Record<OutcomeStatus, number>;
}

export function newBatchState(): BatchState {
  return {
    databaseFailures: [],
    counts: { processed: 0, duplicate: 0, stale: 0, ignored: 0, failed: 0, skipped: 0 },
  };
}

export type ReportOutcome = (batch: BatchState, outcome: RecordOutcome) => void;

/** Counts the outcome, then tells `onOutcome`, whose throw is logged and never changes the outcome. */
export function outcomeReporter(
  onOutcome: ((outcome: RecordOutcome) => void) | undefined,
  logger: InboxLogger,
): ReportOutcome {
  return (batch, outcome) => {
    batch.counts[outcome.status]++;
    if (onOutcome === undefined) return;
    try {
      onOutcome(outcome);
    } catch (error) {
      logger.error("onOutcome threw; the record's outcome stands", {
        messageId: outcome.messageId,
        status: outcome.status,
        error: errorMessage(error),
      });
    }
  };
}
