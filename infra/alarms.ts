import { Duration, Names } from "aws-cdk-lib";
import * as cloudwatch from "aws-cdk-lib/aws-cloudwatch";
import type * as events from "aws-cdk-lib/aws-events";
import type * as kinesis from "aws-cdk-lib/aws-kinesis";
import type * as lambda from "aws-cdk-lib/aws-lambda";
import type * as sns from "aws-cdk-lib/aws-sns";
import type * as sqs from "aws-cdk-lib/aws-sqs";
import type { Construct, IConstruct } from "constructs";
import { AWS_METRIC, METRIC, type MetricName } from "../functions/shared/observe/metricNames.ts";
import {
  LAMBDA_MAX_TIMEOUT_SECONDS,
  lambdaMetricPeriods,
  SCHEDULE_JITTER_SECONDS,
  silentPeriodsBeforeAlarm,
} from "./relayTiming.ts";

const { BREACHING, NOT_BREACHING, MISSING } = cloudwatch.TreatMissingData;
const { GREATER_THAN_THRESHOLD, GREATER_THAN_OR_EQUAL_TO_THRESHOLD, LESS_THAN_THRESHOLD } =
  cloudwatch.ComparisonOperator;
const RUNBOOK = "Runbook: docs/deploy.md#runbook; failure table: docs/operations.md#what-pages-you";
const MINUTE = Duration.minutes(1);

/**
 * 900 s: with the default backoff (1 s doubling to a 300 s cap, 10 attempts) a poison event retries for about
 * 1+2+4+...+256+300 = 811 s before it is dead-lettered; 15 minutes lets that run its course (the dead-letter alarm
 * reports it) while a stuck aggregate still alarms within the quarter hour.
 */
const OLDEST_PENDING_AGE_SECONDS = 900;

/**
 * PendingBacklog's default threshold, in seconds of traffic at the relays' target rate (relay.targetEventsPerSecond
 * x relays): a backlog the relays need a minute to clear, held for the gauges' 2 minutes, is a relay falling
 * behind. A fixed count was 0.3 s of the default 3,000 events/s target: a burst paged.
 */
export const PENDING_BACKLOG_SECONDS = 60;

export interface OutboxAlarmThresholds {
  /** OldestPendingAgeSeconds above this alarms (per destination behind routes). Default 900 (see the alarm). */
  readonly oldestPendingAgeSeconds?: number;
  /**
   * PendingEvents above this alarms. Default: PENDING_BACKLOG_SECONDS (60) of events at the relays' target rate,
   * `relay.targetEventsPerSecond` x `relays` (60,000 with the defaults).
   */
  readonly pendingEvents?: number;
  /** BatchDuration p95 above this alarms. Default 5000 ms. */
  readonly batchDurationP95Ms?: number;
  /**
   * The queue's ApproximateAgeOfOldestMessage above this alarms: consumers stalled. Default 900 s. Also a routed
   * stream's GetRecords.IteratorAgeMilliseconds (in seconds): its readers are that far behind.
   */
  readonly queueOldestMessageAgeSeconds?: number;
}

/** What the alarms watch. */
export interface AlarmSubjects {
  relayFunction: lambda.IFunction;
  purgeFunction: lambda.IFunction;
  relayRule: events.IRule;
  purgeRule: events.IRule;
  metricsRule: events.IRule;
  /** The queue the relay publishes to; undefined with a bus (its consumers are the rules' targets). */
  queue?: sqs.IQueue | undefined;
  /**
   * An OutboxConsumer of the construct reads `queue` and alarms on its oldest message itself: the relay's
   * ConsumersStalled would page a second time for the same stalled queue, so it is left out.
   */
  queueWatchedByConsumer?: boolean | undefined;
  consumerDeadLetterQueue?: sqs.IQueue | undefined;
  /** Name of a Secrets Manager rotation function for the database secret, when there is one. */
  rotationFunctionName?: string | undefined;
  /** The rotation functions of the relay's and purge's logins (infra/logins.ts), when the construct made them. */
  loginRotationFunctionNames?: readonly string[] | undefined;
  /**
   * Behind a route table: each destination the relay publishes to (the default included), by the relay's
   * `destination` metric dimension and a construct-id-safe label.
   */
  destinations?: readonly RoutedDestination[] | undefined;
  /** The construct's EMF metrics, with their `service` dimension (and `destination`, when given). */
  metric(
    name: MetricName,
    source: "relay" | "purge",
    options: { statistic?: string; period?: Duration; destination?: string },
  ): cloudwatch.Metric;
  /**
   * The functions' timeouts: an alarm on their AWS/Lambda metrics, which arrive when an invocation ends, evaluates
   * a window longer than the timeout (lambdaMetricPeriods).
   */
  relayTimeout: Duration;
  purgeTimeout: Duration;
  /** Longest time between two relay ticks (relayTiming). */
  relayTickGapSeconds: number;
  /** How often the purge Lambda publishes the backlog gauges. */
  metricsRate: Duration;
  strictOrder: boolean;
  /** Events/s all relays together aim at (relay.targetEventsPerSecond x relays): PendingBacklog's default scale. */
  targetEventsPerSecond: number;
  /** The routed topics and streams, whose readers' side CloudWatch shows (destinationConsumerAlarmTable). */
  destinationConsumers?: DestinationConsumerSubjects | undefined;
}

export interface RoutedDestination {
  /** The `destination` dimension's value: `<kind>:<name>`, as the relay writes it. */
  metricName: string;
  label: string;
}

/** One row of the table: an alarm, the metric it reads, and what "no data" means for it. */
interface AlarmRow {
  key: string;
  id: string;
  description: string;
  metric: cloudwatch.IMetric;
  threshold: number;
  comparison: cloudwatch.ComparisonOperator;
  evaluationPeriods: number;
  datapointsToAlarm?: number;
  treatMissingData: cloudwatch.TreatMissingData;
}

/**
 * Every alarm of the construct, in one table. Each row says which failure it catches and, through
 * `treatMissingData`, what silence means: BREACHING where the metric must always flow (a heartbeat, the backlog
 * snapshot), NOT_BREACHING where it is written only when something happens (errors, failed invocations, SQS's
 * per-activity metrics), MISSING where another row already reports the silence. docs/operations.md's failure
 * table is written from this one.
 */
export function alarmTable(subjects: AlarmSubjects, thresholds: OutboxAlarmThresholds): AlarmRow[] {
  const gaugePeriod = subjects.metricsRate;
  // The gauges come once per metrics tick; "for 2 minutes" is 2 periods at the 1-minute default, at least 1.
  const gaugePeriods = Math.max(1, Math.ceil(120 / gaugePeriod.toSeconds()));
  const gauge = (name: MetricName) =>
    subjects.metric(name, "purge", { statistic: "Maximum", period: gaugePeriod });
  // The relay's heartbeat comes every flush interval (10 s) while an invocation runs, and at its start: a relay
  // in drain mode, which ends when nothing is left, writes at least one per tick, so the tick gap bounds the
  // silence (relayTiming.ts).
  const heartbeatPeriods = silentPeriodsBeforeAlarm(subjects.relayTickGapSeconds, 60);
  // Lambda's metrics of a function, in periods of `period`, evaluated over its timeout plus a period.
  const relayLambdaPeriods = (period: Duration) =>
    lambdaMetricPeriods(subjects.relayTimeout.toSeconds(), period.toSeconds());
  const FIVE_MINUTES = Duration.minutes(5);
  const snapshotPeriods = silentPeriodsBeforeAlarm(
    gaugePeriod.toSeconds() + SCHEDULE_JITTER_SECONDS,
    gaugePeriod.toSeconds(),
  );
  const failedInvocations = (rule: events.IRule) =>
    new cloudwatch.Metric({
      namespace: AWS_METRIC.eventsNamespace,
      metricName: AWS_METRIC.ruleFailedInvocations,
      dimensionsMap: { RuleName: rule.ruleName },
      statistic: "Sum",
      period: Duration.minutes(5),
    });

  const rows: (AlarmRow | false)[] = [
    {
      key: "relayNotRunning",
      id: "RelayNotRunningAlarm",
      description:
        `No relay heartbeat for ${heartbeatPeriods} minutes: the relay is not running. Its schedule is disabled ` +
        "or deleted, EventBridge lost the permission to invoke it, every invocation is throttled, or it never " +
        "reaches its handler (a bad setting at cold start, no route to Secrets Manager). Nothing is published. " +
        RUNBOOK,
      // The relay's own EMF heartbeat, stamped when written (every flush interval while it runs), not Lambda's
      // Invocations, which arrives when an invocation ends, stamped with its start: the newest 2-3 minutes of it
      // are always empty while a 155 s invocation runs. Filled with 0 (silenceMetric), so silence pages after
      // heartbeatPeriods minutes, not after CloudWatch's whole evaluation range.
      metric: silenceMetric(
        "heartbeat",
        subjects.metric(METRIC.relayHeartbeat, "relay", { statistic: "Sum", period: MINUTE }),
        "Relay heartbeats, empty minutes as 0",
      ),
      threshold: 1,
      comparison: LESS_THAN_THRESHOLD,
      // Silence is the failure. The periods allow for the longest legal gap between ticks (relayTiming.ts), so a
      // late tick of a relay in drain mode never alarms. Breaching also covers a range the expression returns
      // nothing for (no heartbeat in the whole range).
      evaluationPeriods: heartbeatPeriods,
      datapointsToAlarm: heartbeatPeriods,
      treatMissingData: BREACHING,
    },
    {
      key: "relayStalled",
      id: "RelayStalledAlarm",
      description:
        "The relay published nothing for 3 minutes while its rounds or publishes failed: SQS or the bus " +
        "unreachable or refusing (AccessDenied, KMS), the database unreachable, timing out or refusing the " +
        "password, or every invocation failing at its start (a setting, the queue check). The logs name the " +
        `error. ${RUNBOOK}`,
      // Written by each relay every flush interval (10 s) while it runs, stamped then; only by windows that did
      // something, 1 for failures without a publish, 0 for a publish. Minimum: a relay that published in a
      // minute clears it, idle ones say nothing, so every relay that worked that minute failed.
      metric: subjects.metric(METRIC.relayStalled, "relay", { statistic: "Minimum", period: MINUTE }),
      threshold: 1,
      comparison: GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      // 3 of 3: a minute of failures (a database failover, an SQS blip) does not page; a stall does within 3
      // minutes of its first failed window. A tiny backlog in backoff can leave a minute without a try: the
      // alarm may then return to OK while the outage lasts, and OldestPendingAge keeps paging.
      evaluationPeriods: 3,
      datapointsToAlarm: 3,
      // Idle windows write nothing; no relay at all is RelayNotRunning's to report.
      treatMissingData: NOT_BREACHING,
    },
    {
      key: "scheduleFailedInvocations",
      id: "ScheduleFailedInvocationsAlarm",
      description:
        "EventBridge could not invoke the relay or the purge (permission removed, function deleted, throttled " +
        `past the event's 60 s age). ${RUNBOOK}`,
      metric: new cloudwatch.MathExpression({
        expression: "FILL(relay, 0) + FILL(purge, 0) + FILL(snapshot, 0)",
        usingMetrics: {
          relay: failedInvocations(subjects.relayRule),
          purge: failedInvocations(subjects.purgeRule),
          snapshot: failedInvocations(subjects.metricsRule),
        },
        period: Duration.minutes(5),
        label: "FailedInvocations of the outbox schedules",
      }),
      threshold: 1,
      comparison: GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      // Written only when an invocation fails.
      treatMissingData: NOT_BREACHING,
    },
    {
      key: "relayErrors",
      id: "RelayErrorsAlarm",
      description:
        `Two relay invocations failed within ${relayLambdaPeriods(MINUTE)} minutes: no round succeeded (database ` +
        "or secret unreachable, wrong password, queue missing or not FIFO, bad configuration), an invocation " +
        "made no progress while events were pending, or it timed out. The backstop behind RelayStalled: Lambda " +
        `reports an error when the invocation ends, up to its timeout late. ${RUNBOOK}`,
      metric: subjects.relayFunction.metricErrors({ period: MINUTE, statistic: "Sum" }),
      threshold: 1,
      comparison: GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      // Lambda stamps an error with its invocation's start and sends it at the end: the window covers the
      // timeout plus a period, so an error is still inside it when it arrives (lambdaMetricPeriods).
      evaluationPeriods: relayLambdaPeriods(MINUTE),
      datapointsToAlarm: 2,
      // No invocation, no datapoint: RelayNotRunning reports that.
      treatMissingData: NOT_BREACHING,
    },
    ...(subjects.destinations ?? []).map((place) => ({
      key: `publishFailures${place.label}`,
      id: `${place.label}PublishFailuresAlarm`,
      description:
        `${place.metricName} refused the relay's requests or entries in each of the last 5 minutes: access ` +
        "denied (its policy, its KMS key), deleted, throttling. Its events wait in the outbox and retry while " +
        "the other destinations keep publishing (an aggregate whose earlier event waits here waits too). " +
        RUNBOOK,
      // One alarm per destination instead of the total's: the total would page a second time for the same
      // outage, without saying where. Written every 10 s, zeros included, once the relay has seen the
      // destination (observe/metrics.ts).
      metric: subjects.metric(METRIC.publishFailures, "relay", {
        statistic: "Sum",
        period: MINUTE,
        destination: place.metricName,
      }),
      threshold: 1,
      comparison: GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 5,
      datapointsToAlarm: 5,
      treatMissingData: NOT_BREACHING,
    })),
    (subjects.destinations ?? []).length === 0 && {
      key: "publishFailures",
      id: "PublishFailuresAlarm",
      description:
        "The queue or bus refused the relay's requests or entries in each of the last 5 minutes: access denied " +
        "(the queue or bus policy, its KMS key), queue or bus deleted, throttling. Events wait in the outbox and " +
        "retry; a single poison " +
        `event backs off and cannot keep this up for 5 minutes. ${RUNBOOK}`,
      metric: subjects.metric(METRIC.publishFailures, "relay", { statistic: "Sum", period: MINUTE }),
      threshold: 1,
      comparison: GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 5,
      datapointsToAlarm: 5,
      // A running relay writes the counter every 10 s (a timer, stamped then), zeros included; silence means no
      // relay, which RelayNotRunning reports.
      treatMissingData: NOT_BREACHING,
    },
    {
      key: "relayThrottles",
      id: "RelayThrottlesAlarm",
      description:
        "The relay was throttled: the account's concurrency is exhausted, or (with relay.reservedConcurrency, which " +
        "admits every overlap the schedule can produce, early and late ticks included) something invoked it beyond " +
        `the schedule. ${RUNBOOK}`,
      metric: subjects.relayFunction.metricThrottles({ period: FIVE_MINUTES, statistic: "Sum" }),
      threshold: 1,
      comparison: GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      // A throttle is counted when the invocation is refused; the window still covers the timeout, as for every
      // alarm on AWS/Lambda (lambdaMetricPeriods).
      evaluationPeriods: relayLambdaPeriods(FIVE_MINUTES),
      datapointsToAlarm: 1,
      treatMissingData: NOT_BREACHING,
    },
    {
      key: "batchDuration",
      id: "BatchDurationAlarm",
      description:
        "p95 of one relay round (claim, publish, record) is above the threshold in 3 of 5 minutes: SQS or the " +
        `database is slow. A round over 25 s hits the publish/statement timeouts. ${RUNBOOK}`,
      metric: subjects.metric(METRIC.batchDuration, "relay", { statistic: "p95", period: MINUTE }),
      threshold: thresholds.batchDurationP95Ms ?? 5000,
      comparison: GREATER_THAN_THRESHOLD,
      evaluationPeriods: 5,
      datapointsToAlarm: 3,
      // No rounds, no data: an idle relay is not a slow one.
      treatMissingData: NOT_BREACHING,
    },
    {
      key: "snapshotStopped",
      id: "SnapshotStoppedAlarm",
      description:
        `The outbox backlog metrics stopped for ${snapshotPeriods} periods: the purge Lambda's snapshot runs are ` +
        "not invoked or fail (database down, secret wrong). The backlog alarms below are blind until it is back. " +
        RUNBOOK,
      metric: silenceMetric(
        "snapshots",
        subjects.metric(METRIC.pendingEvents, "purge", { statistic: "SampleCount", period: gaugePeriod }),
        "Backlog snapshots, empty periods as 0",
      ),
      threshold: 1,
      comparison: LESS_THAN_THRESHOLD,
      evaluationPeriods: snapshotPeriods,
      datapointsToAlarm: snapshotPeriods,
      // Every snapshot writes PendingEvents: silence is the failure.
      treatMissingData: BREACHING,
    },
    ...(subjects.destinations ?? []).map((place) => ({
      key: `oldestPendingAge${place.label}`,
      id: `${place.label}OldestPendingAgeAlarm`,
      description:
        `The oldest unpublished outbox event bound for ${place.metricName} is older than the threshold: the relay ` +
        `is not keeping up with it, cannot reach it, or one of its aggregates is stuck behind retries. ${RUNBOOK}`,
      // One alarm per destination instead of the outbox-wide one, which would page a second time for the same
      // stalled destination without saying which. Written by every snapshot for every destination, zeros
      // included (observe/pendingByDestination.ts); events no route takes are dead-lettered at their first claim
      // (DeadLetters pages), so the destinations cover every pending event a running relay can publish.
      metric: subjects.metric(METRIC.oldestPendingAgeSeconds, "purge", {
        statistic: "Maximum",
        period: gaugePeriod,
        destination: place.metricName,
      }),
      threshold: thresholds.oldestPendingAgeSeconds ?? OLDEST_PENDING_AGE_SECONDS,
      comparison: GREATER_THAN_THRESHOLD,
      evaluationPeriods: gaugePeriods,
      treatMissingData: MISSING,
    })),
    (subjects.destinations ?? []).length === 0 && {
      key: "oldestPendingAge",
      id: "OldestPendingAgeAlarm",
      description:
        "The oldest unpublished outbox event is older than the threshold: the relay is not keeping up, cannot " +
        `reach SQS, or one aggregate is stuck behind retries. ${RUNBOOK}`,
      metric: gauge(METRIC.oldestPendingAgeSeconds),
      threshold: thresholds.oldestPendingAgeSeconds ?? OLDEST_PENDING_AGE_SECONDS,
      comparison: GREATER_THAN_THRESHOLD,
      evaluationPeriods: gaugePeriods,
      // Silence is SnapshotStopped's to report; here it keeps the last state instead of flapping to OK.
      treatMissingData: MISSING,
    },
    {
      key: "pendingBacklog",
      id: "PendingBacklogAlarm",
      description: `More than the threshold of outbox events are waiting to be published. ${RUNBOOK}`,
      metric: gauge(METRIC.pendingEvents),
      threshold: thresholds.pendingEvents ?? PENDING_BACKLOG_SECONDS * subjects.targetEventsPerSecond,
      comparison: GREATER_THAN_THRESHOLD,
      evaluationPeriods: gaugePeriods,
      treatMissingData: MISSING,
    },
    {
      key: "deadLetters",
      id: "DeadLettersAlarm",
      description:
        "Outbox events were dead-lettered (SQS rejected them max-attempts times, or the row is malformed). They " +
        `stay parked until redriven or purged. ${RUNBOOK}`,
      metric: gauge(METRIC.deadLetters),
      threshold: 0,
      comparison: GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: MISSING,
    },
    {
      key: "newDeadLetters",
      id: "NewDeadLettersAlarm",
      description:
        "The relay dead-lettered outbox events in the last minute. Pages for each new dead letter: DeadLetters " +
        `above stays in ALARM while any is kept, so it says nothing about the second one. ${RUNBOOK}`,
      metric: subjects.metric(METRIC.eventsDeadLettered, "relay", { statistic: "Sum", period: MINUTE }),
      threshold: 0,
      comparison: GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      // A running relay writes the counter every window, zeros included; no relay is RelayNotRunning's to report.
      treatMissingData: NOT_BREACHING,
    },
    subjects.strictOrder && {
      key: "blockedAggregates",
      id: "BlockedAggregatesAlarm",
      description: `Strict order: aggregates are blocked behind a dead letter and publish nothing. ${RUNBOOK}`,
      metric: gauge(METRIC.blockedAggregates),
      threshold: 0,
      comparison: GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: MISSING,
    },
    {
      key: "purgeErrors",
      id: "PurgeErrorsAlarm",
      description:
        "The purge Lambda failed (a purge, or a snapshot-only run): old rows may not be deleted and the backlog " +
        `metrics may be stale. ${RUNBOOK}`,
      // 5 minutes: a failing database fails every snapshot tick; an hourly purge failure shows for one period.
      metric: subjects.purgeFunction.metricErrors({ period: FIVE_MINUTES, statistic: "Sum" }),
      threshold: 1,
      comparison: GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      // An error arrives when the purge ends, up to its timeout (5 minutes at most by default) after its start.
      evaluationPeriods: lambdaMetricPeriods(subjects.purgeTimeout.toSeconds(), FIVE_MINUTES.toSeconds()),
      datapointsToAlarm: 1,
      treatMissingData: NOT_BREACHING,
    },
    subjects.queue !== undefined &&
      subjects.queueWatchedByConsumer !== true && {
        key: "consumersStalled",
        id: "ConsumersStalledAlarm",
        description:
          "The oldest message in the queue is older than the threshold for 3 minutes: consumers are down, failing " +
          `before they delete, or too slow. SQS drops messages after the 14-day retention. ${RUNBOOK}`,
        metric: subjects.queue.metricApproximateAgeOfOldestMessage({ period: MINUTE, statistic: "Maximum" }),
        threshold: thresholds.queueOldestMessageAgeSeconds ?? 900,
        comparison: GREATER_THAN_THRESHOLD,
        evaluationPeriods: 3,
        datapointsToAlarm: 3,
        // SQS stops writing the metrics of a queue that has been idle for hours: an empty queue, not a stall.
        treatMissingData: NOT_BREACHING,
      },
    subjects.consumerDeadLetterQueue !== undefined && {
      key: "consumerDeadLetters",
      id: "ConsumerDeadLettersAlarm",
      description:
        "A consumer failed a message maxReceiveCount times and SQS moved it to the consumer dead-letter queue " +
        `(this is the consumers' side, not the relay's). ${RUNBOOK}`,
      metric: subjects.consumerDeadLetterQueue.metricApproximateNumberOfMessagesVisible({
        period: Duration.minutes(5),
        statistic: "Maximum",
      }),
      threshold: 0,
      comparison: GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: NOT_BREACHING,
    },
    subjects.consumerDeadLetterQueue !== undefined && {
      key: "newConsumerDeadLetters",
      id: "NewConsumerDeadLettersAlarm",
      description:
        "More messages in the consumer dead-letter queue than a minute before: a consumer just failed another " +
        "message maxReceiveCount times. Pages for each new one, where ConsumerDeadLetters stays in ALARM while " +
        `any is kept. ${RUNBOOK}`,
      // Not the DLQ's NumberOfMessagesSent: SQS counts only messages sent to a queue by a SendMessage call, not
      // those it moves there after maxReceiveCount ("if a message is sent to a dead-letter queue as a result of a
      // failed processing attempt, it isn't captured by this metric", SQS developer guide, "Available CloudWatch
      // metrics for Amazon SQS"). The rise of the visible count is what shows a move; FILL makes the first
      // datapoint after an empty, metric-less queue count as a rise from 0. A redrive or a purge lowers the
      // count, which is not an alarm; a move and a redrive in the same minute can cancel out.
      metric: new cloudwatch.MathExpression({
        expression: "DIFF(FILL(visible, 0))",
        usingMetrics: {
          visible: subjects.consumerDeadLetterQueue.metricApproximateNumberOfMessagesVisible({
            period: MINUTE,
            statistic: "Maximum",
          }),
        },
        period: MINUTE,
        label: "New messages in the consumer dead-letter queue",
      }),
      threshold: 0,
      comparison: GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: NOT_BREACHING,
    },
    subjects.rotationFunctionName !== undefined && {
      key: "secretRotationErrors",
      id: "SecretRotationErrorsAlarm",
      description:
        "The database secret's rotation Lambda failed: it cannot reach Secrets Manager or the database, or the " +
        "new password was refused. The old password keeps working until a rotation half-completes; then the " +
        `relay's RelayErrors alarm follows. ${RUNBOOK}`,
      metric: new cloudwatch.Metric({
        namespace: AWS_METRIC.lambdaNamespace,
        metricName: AWS_METRIC.lambdaErrors,
        dimensionsMap: { FunctionName: subjects.rotationFunctionName },
        statistic: "Sum",
        period: FIVE_MINUTES,
      }),
      threshold: 1,
      comparison: GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      // The rotation function is not ours: its timeout is unknown here, so the window covers Lambda's longest.
      evaluationPeriods: lambdaMetricPeriods(LAMBDA_MAX_TIMEOUT_SECONDS, FIVE_MINUTES.toSeconds()),
      datapointsToAlarm: 1,
      // The rotation runs monthly: silence is the normal state.
      treatMissingData: NOT_BREACHING,
    },
    (subjects.loginRotationFunctionNames ?? []).length > 0 && {
      key: "loginRotationErrors",
      id: "LoginRotationErrorsAlarm",
      description:
        "The rotation of the relay's or the purge's login failed (multi-user rotation, the master secret as its " +
        "superuser): the rotation Lambda cannot reach Secrets Manager or the database, the master secret is wrong, " +
        "or the clone login could not be made. The login's current password keeps working; the rotation is " +
        `retried at its next schedule. The rotation Lambda's log (/aws/lambda/<name>) names the step. ${RUNBOOK}`,
      // Lambda's Errors of the rotation functions, not Secrets Manager's RotationFailed event: that one is a
      // CloudTrail event, which needs a trail-backed EventBridge rule rather than an alarm of this table, while
      // Secrets Manager invokes the function once per step and any failed step is an error here. One alarm for
      // both logins (one failure mode, one page); the description says where to look for which one.
      metric: new cloudwatch.MathExpression({
        expression: (subjects.loginRotationFunctionNames ?? []).map((_, i) => `FILL(r${i}, 0)`).join(" + "),
        usingMetrics: Object.fromEntries(
          (subjects.loginRotationFunctionNames ?? []).map((name, i) => [
            `r${i}`,
            new cloudwatch.Metric({
              namespace: AWS_METRIC.lambdaNamespace,
              metricName: AWS_METRIC.lambdaErrors,
              dimensionsMap: { FunctionName: name },
              statistic: "Sum",
              period: FIVE_MINUTES,
            }),
          ]),
        ),
        period: FIVE_MINUTES,
        label: "Errors of the login rotation functions",
      }),
      threshold: 1,
      comparison: GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      // AWS's application sets the function's timeout, not this construct: the window covers Lambda's longest
      // (900 s) plus a period, so an error sent at the end of a long step is still inside it.
      evaluationPeriods: lambdaMetricPeriods(LAMBDA_MAX_TIMEOUT_SECONDS, FIVE_MINUTES.toSeconds()),
      datapointsToAlarm: 1,
      // Rotations run monthly: silence is the normal state.
      treatMissingData: NOT_BREACHING,
    },
    ...destinationConsumerAlarmTable({
      ...subjects.destinationConsumers,
      streamIteratorAgeSeconds: thresholds.queueOldestMessageAgeSeconds ?? 900,
    }),
  ];
  return rows.filter((row): row is AlarmRow => row !== false);
}

/**
 * The readers' side of the topics, streams and buses the relay publishes to, as far as the construct knows them
 * (infra/destinationConsumers.ts): a queue's consumers have ConsumersStalled and the consumer's alarms; these
 * places had none, so a subscriber that stopped receiving or a stream reader falling behind paged nobody.
 */
export interface DestinationConsumerSubjects {
  topics?: readonly { label: string; topic: sns.ITopic }[];
  streams?: readonly { label: string; stream: kinesis.IStream }[];
  /** The routed topics' subscriptions with a redrive policy, by their dead-letter queue (found in the stack). */
  subscriptionDeadLetterQueues?: readonly { label: string; queue: sqs.IQueue }[];
  /** The rules on a bus the relay publishes to (found in the stack), by their metrics' dimensions. */
  busRules?: readonly { label: string; dimensions: Record<string, string> }[];
  /** A stream's iterator age that alarms: the queues' oldest-message threshold. Default 900. */
  streamIteratorAgeSeconds?: number;
}

/** Their rows. */
export function destinationConsumerAlarmTable(subjects: DestinationConsumerSubjects): AlarmRow[] {
  const streamAgeSeconds = subjects.streamIteratorAgeSeconds ?? 900;
  const FIVE_MINUTES = Duration.minutes(5);
  const events = (metricName: string, dimensionsMap: Record<string, string>) =>
    new cloudwatch.Metric({
      namespace: AWS_METRIC.eventsNamespace,
      metricName,
      dimensionsMap,
      statistic: "Sum",
      period: FIVE_MINUTES,
    });
  return [
    ...(subjects.topics ?? []).map(({ label, topic }) => ({
      key: `deliveryFailures${label}`,
      id: `${label}DeliveryFailuresAlarm`,
      description:
        `SNS gave up delivering messages of ${topic.node.path} to a subscriber: at once on a client-side error ` +
        "(the queue or function deleted, its policy or KMS key refusing SNS), after the delivery policy's retries " +
        "otherwise (for SQS and Lambda subscribers 100,015 attempts over 23 days). The message is in the " +
        "subscription's dead-letter queue if it has one, else lost for that subscriber (the outbox row is " +
        `published). ${RUNBOOK}`,
      // SNS sends its topic metrics every 5 minutes (SNS developer guide, "Monitoring Amazon SNS topics using
      // CloudWatch"): a 1-minute period would see empty minutes between them. The retries: SNS developer guide,
      // "Amazon SNS message delivery retries".
      metric: topic.metricNumberOfNotificationsFailed({ period: FIVE_MINUTES, statistic: "Sum" }),
      threshold: 1,
      comparison: GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      // Written only when a delivery fails.
      treatMissingData: NOT_BREACHING,
    })),
    ...(subjects.subscriptionDeadLetterQueues ?? []).map(({ label, queue }) => ({
      key: `subscriptionDeadLetters${label}`,
      id: `${label}DeadLettersAlarm`,
      description:
        "An SNS subscription's dead-letter queue holds messages SNS could not deliver to the subscriber; they stay " +
        `until redriven (a message move task) or purged. ${RUNBOOK}`,
      metric: queue.metricApproximateNumberOfMessagesVisible({ period: FIVE_MINUTES, statistic: "Maximum" }),
      threshold: 0,
      comparison: GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      // An empty, idle queue writes nothing (its first message after 6 h idle shows up to 15 min late).
      treatMissingData: NOT_BREACHING,
    })),
    ...(subjects.streams ?? []).flatMap(({ label, stream }) => [
      {
        key: `iteratorAge${label}`,
        id: `${label}IteratorAgeAlarm`,
        description:
          `A reader of ${stream.node.path} (GetRecords: a Lambda event source, the KCL, Firehose) is more than ` +
          `${streamAgeSeconds} s behind for 3 minutes: stopped, failing a batch it retries, or too slow. Records ` +
          `past the stream's retention (24 h by default) are lost to it. ${RUNBOOK}`,
        metric: stream.metricGetRecordsIteratorAgeMilliseconds({ period: MINUTE, statistic: "Maximum" }),
        threshold: streamAgeSeconds * 1000,
        comparison: GREATER_THAN_THRESHOLD,
        evaluationPeriods: 3,
        datapointsToAlarm: 3,
        // Written while some reader calls GetRecords (a Lambda event source polls every shard about once a
        // second, idle or not). A reader that stops calling writes nothing: the alarm keeps its state, so a
        // reader that fell behind and then stopped keeps paging rather than clearing. Enhanced fan-out readers
        // (SubscribeToShard) are not in this metric.
        treatMissingData: MISSING,
      },
      {
        key: `writeThrottles${label}`,
        id: `${label}WriteThrottlesAlarm`,
        description:
          `${stream.node.path} refused records for its write throughput (the relay's or another producer's) in 3 ` +
          "of the last 5 minutes: its shards are too few for the traffic (add shards, or on-demand capacity). The " +
          `relay's refused records wait in the outbox and retry; their events arrive late. ${RUNBOOK}`,
        // PutRecords' per-record throttling included (Kinesis developer guide, "Monitoring the Amazon Kinesis
        // Data Streams service with Amazon CloudWatch"); 3 of 5 so a burst the retries absorb does not page,
        // before the destination's PublishFailures (5 of 5) says it never gets through.
        metric: stream.metricWriteProvisionedThroughputExceeded({ period: MINUTE, statistic: "Sum" }),
        threshold: 1,
        comparison: GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: 5,
        datapointsToAlarm: 3,
        treatMissingData: NOT_BREACHING,
      },
    ]),
    ...(subjects.busRules ?? []).map(({ label, dimensions }) => ({
      key: `ruleDeliveryFailures${label}`,
      id: `${label}DeliveryFailuresAlarm`,
      description:
        `The EventBridge rule ${dimensions.RuleName} could not deliver events to its target after the target's ` +
        "retry policy (24 h by default), or refused to invoke it (DeadLetterInvocations: a loop, a missing " +
        "permission): each is in the target's dead-letter queue if it has one, else dropped for that target. " +
        RUNBOOK,
      // FailedInvocations leaves out what DeadLetterInvocations counts ("Monitoring Amazon EventBridge"): the sum
      // is every event the rule could not deliver. A rule of a custom bus is measured by EventBusName and RuleName.
      metric: new cloudwatch.MathExpression({
        expression: "FILL(failed, 0) + FILL(refused, 0)",
        usingMetrics: {
          failed: events(AWS_METRIC.ruleFailedInvocations, dimensions),
          refused: events(AWS_METRIC.ruleDeadLetterInvocations, dimensions),
        },
        period: FIVE_MINUTES,
        label: `Undelivered events of ${dimensions.RuleName}`,
      }),
      threshold: 1,
      comparison: GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      // Written only when an invocation fails.
      treatMissingData: NOT_BREACHING,
    })),
  ];
}

/**
 * A silence alarm's metric: `FILL(id, 0)` of a metric that must always flow, so each empty period is a real,
 * breaching 0. On the bare metric, missing = breaching fills in only as few periods as it must: CloudWatch
 * retrieves a longer evaluation range than the evaluation periods (5 for 3) and evaluates the most recent real
 * datapoints it finds there, so "0 - - - -" of a 3-of-3 alarm stays OK and the alarm fires only when the whole
 * range is empty (CloudWatch user guide, "Configuring how CloudWatch alarms treat missing data", its evaluation
 * range table): 5 silent periods, not 3. Filled, the N-th empty period pages.
 */
function silenceMetric(id: string, metric: cloudwatch.Metric, label: string): cloudwatch.MathExpression {
  return new cloudwatch.MathExpression({
    expression: `FILL(${id}, 0)`,
    usingMetrics: { [id]: metric },
    period: metric.period,
    label,
  });
}

/** What an OutboxConsumer's alarms watch (infra/consumer.ts). */
export interface ConsumerAlarmSubjects {
  function: lambda.IFunction;
  /** The function's timeout: its Errors arrive up to that late (lambdaMetricPeriods). */
  timeout: Duration;
  queue: sqs.IQueue;
  deadLetterQueue?: sqs.IQueue | undefined;
  /** The inbox's InboxRecordsFailed count (EMF, outcomeMetrics.ts) in the function's namespace and service. */
  failedRecords: cloudwatch.IMetric;
  oldestMessageAgeSeconds: number;
}

/** The consumer's rows, the same table shape; the ids are the construct's since it was first released. */
export function consumerAlarmTable(subjects: ConsumerAlarmSubjects): AlarmRow[] {
  // At least 3 one-minute periods (2 of 3, as first released), and the timeout plus a period when longer.
  const errorPeriods = Math.max(3, lambdaMetricPeriods(subjects.timeout.toSeconds(), MINUTE.toSeconds()));
  const rows: (AlarmRow | false)[] = [
    {
      key: "errors",
      id: "ErrorsAlarm",
      // A failed record is reported, not thrown: an invocation error means the whole batch failed (the inbox's
      // database unreachable or not answering, a function timeout too short for one record, bad configuration),
      // so every message of it comes back and each such receive counts towards maxReceiveCount.
      description: `Outbox consumer invocations failed as a whole in 2 of ${errorPeriods} minutes: nothing is applied.`,
      metric: subjects.function.metricErrors({ period: MINUTE, statistic: "Sum" }),
      threshold: 1,
      comparison: GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      // Lambda stamps an error with its invocation's start and sends it at the end: the window covers the
      // function's timeout plus a period, so an error of a long invocation is still inside it when it arrives.
      evaluationPeriods: errorPeriods,
      datapointsToAlarm: 2,
      treatMissingData: NOT_BREACHING,
    },
    {
      key: "failedRecords",
      id: "FailedRecordsAlarm",
      // 2 of 3 five-minute periods: a one-off failure that the redelivery fixes stays quiet; a message that
      // keeps failing (redelivered every visibility timeout, 3 minutes at the construct's 6x) alarms within
      // 10 minutes, before maxReceiveCount moves it aside.
      description:
        "The consumer failed records (handler errors, payloads its parse hook refused, unrouted event types, " +
        "aborted transactions) in 2 of the last 3 five-minute periods. The log names each one.",
      metric: subjects.failedRecords,
      threshold: 1,
      comparison: GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 3,
      datapointsToAlarm: 2,
      // Written once per invocation, zeros included: no data is no invocation, which the age alarm watches.
      treatMissingData: NOT_BREACHING,
    },
    {
      key: "oldestMessageAge",
      id: "OldestMessageAgeAlarm",
      // 900 s: a poison message is retried maxReceiveCount (default 5) x the visibility timeout before it moves
      // aside; a quarter of an hour still catches a consumer that stopped (disabled mapping, throttled to zero).
      description:
        "The oldest message in the outbox queue is older than the threshold: the consumer is behind or stopped.",
      metric: subjects.queue.metricApproximateAgeOfOldestMessage({ period: MINUTE, statistic: "Maximum" }),
      threshold: subjects.oldestMessageAgeSeconds,
      comparison: GREATER_THAN_THRESHOLD,
      evaluationPeriods: 3,
      treatMissingData: NOT_BREACHING,
    },
    subjects.deadLetterQueue !== undefined && {
      key: "deadLetters",
      id: "DeadLettersAlarm",
      description:
        "The consumer failed a message maxReceiveCount times and SQS moved it (and its group-mates received with " +
        "it) to the dead-letter queue. Fix the cause, then redrive in order.",
      metric: subjects.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
        period: Duration.minutes(5),
        statistic: "Maximum",
      }),
      threshold: 0,
      comparison: GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: NOT_BREACHING,
    },
  ];
  return rows.filter((row): row is AlarmRow => row !== false);
}

export function createAlarms(
  scope: Construct,
  subjects: AlarmSubjects,
  thresholds: OutboxAlarmThresholds,
): Record<string, cloudwatch.Alarm> {
  return createAlarmsFrom(scope, alarmTable(subjects, thresholds));
}

export function createAlarmsFrom(scope: Construct, rows: AlarmRow[]): Record<string, cloudwatch.Alarm> {
  const alarms: Record<string, cloudwatch.Alarm> = {};
  for (const row of rows) {
    alarms[row.key] = new cloudwatch.Alarm(scope, row.id, {
      alarmDescription: row.description,
      metric: row.metric,
      threshold: row.threshold,
      comparisonOperator: row.comparison,
      evaluationPeriods: row.evaluationPeriods,
      ...(row.datapointsToAlarm === undefined ? {} : { datapointsToAlarm: row.datapointsToAlarm }),
      treatMissingData: row.treatMissingData,
    });
  }
  return alarms;
}

/**
 * The function name CDK gives a `SecretRotation`'s Lambda (the last 64 characters of the rotation construct's
 * unique id, aws-secretsmanager's secret-rotation.ts): what `database.rotationFunctionName` needs for its alarm.
 */
export function secretRotationFunctionName(rotation: IConstruct): string {
  const uniqueId = Names.uniqueId(rotation);
  return uniqueId.slice(Math.max(uniqueId.length - 64, 0));
}
