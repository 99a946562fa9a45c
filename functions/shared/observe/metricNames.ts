/**
 * Every metric name the project writes, in one place: the emitters (metrics.ts, the inbox's
 * consumer/outcomeMetrics.ts) write them and the CDK alarms and dashboard (infra/alarms.ts, infra/dashboard.ts,
 * infra/consumer.ts) read them, so a rename cannot leave an alarm watching a metric nobody writes (CloudWatch
 * reports such an alarm as INSUFFICIENT_DATA, or as healthy where missing data is NOT_BREACHING).
 * docs/metrics.md lists each with its unit and dimensions.
 */

/** The relay's and the purge's metrics. */
export const METRIC = {
  pendingEvents: "PendingEvents",
  oldestPendingAgeSeconds: "OldestPendingAgeSeconds",
  deadLetters: "DeadLetters",
  blockedAggregates: "BlockedAggregates",
  purgedRows: "PurgedRows",
  purgeDuration: "PurgeDuration",
  eventsPublished: "EventsPublished",
  publishFailures: "PublishFailures",
  /** Behind a route table: events no route takes and no default catches (dead-lettered at their first claim). */
  unroutedEvents: "UnroutedEvents",
  eventsDeadLettered: "EventsDeadLettered",
  /** Rows whose payload did not load within the load's statement_timeout (relay/loadBudget.ts); retried. */
  payloadLoadTimeouts: "PayloadLoadTimeouts",
  batchDuration: "BatchDuration",
  publishLag: "PublishLag",
  snapshotErrors: "SnapshotErrors",
  purgeErrors: "PurgeErrors",
  failedRounds: "FailedRounds",
  relayHeartbeat: "RelayHeartbeat",
  relayStalled: "RelayStalled",
} as const;

export type MetricName = (typeof METRIC)[keyof typeof METRIC];

/** The inbox's counts, one per outcome of a record (`InboxRecords` + the status). */
export const INBOX_METRIC = {
  processed: "InboxRecordsProcessed",
  duplicate: "InboxRecordsDuplicate",
  stale: "InboxRecordsStale",
  ignored: "InboxRecordsIgnored",
  failed: "InboxRecordsFailed",
  skipped: "InboxRecordsSkipped",
} as const;

/**
 * AWS's own metrics the alarms read beside ours: EventBridge's per-rule FailedInvocations and Lambda's Errors
 * (Amazon EventBridge User Guide, "Monitoring Amazon EventBridge"; AWS Lambda Developer Guide, "Types of metrics
 * for Lambda functions").
 */
export const AWS_METRIC = {
  eventsNamespace: "AWS/Events",
  ruleFailedInvocations: "FailedInvocations",
  ruleDeadLetterInvocations: "DeadLetterInvocations",
  lambdaNamespace: "AWS/Lambda",
  lambdaErrors: "Errors",
} as const;
