import { Duration } from "aws-cdk-lib";
import * as cloudwatch from "aws-cdk-lib/aws-cloudwatch";
import type { Construct } from "constructs";
import { METRIC, type MetricName } from "../functions/shared/observe/metricNames.ts";
import type { AlarmSubjects } from "./alarms.ts";

/** The outbox at a glance: backlog, throughput, latency, the Lambdas, the queue, and every alarm's state. */
export function createDashboard(
  scope: Construct,
  subjects: AlarmSubjects,
  purgeRate: Duration,
  alarms: cloudwatch.IAlarm[],
): cloudwatch.Dashboard {
  const { metricsRate, relayFunction, purgeFunction, queue, consumerDeadLetterQueue } = subjects;
  const gauge = (name: MetricName) =>
    subjects.metric(name, "purge", { statistic: "Maximum", period: metricsRate });
  const perPurge = (name: MetricName) =>
    subjects.metric(name, "purge", { statistic: "Sum", period: purgeRate });
  const relay = (name: MetricName, statistic = "Sum") =>
    subjects.metric(name, "relay", { statistic, period: Duration.minutes(1) });
  const perDestination = (name: MetricName, destination: string) =>
    subjects.metric(name, "relay", { statistic: "Sum", period: Duration.minutes(1), destination }).with({
      label: destination,
    });
  const width = 8;
  return new cloudwatch.Dashboard(scope, "Dashboard", {
    defaultInterval: Duration.hours(6),
    widgets: [
      [
        new cloudwatch.GraphWidget({
          title: "Backlog (from the purge)",
          width,
          left: [gauge(METRIC.pendingEvents), gauge(METRIC.deadLetters), gauge(METRIC.blockedAggregates)],
          right: [gauge(METRIC.oldestPendingAgeSeconds)],
        }),
        new cloudwatch.GraphWidget({
          title: "Relay throughput per minute",
          width,
          left: [
            relay(METRIC.eventsPublished),
            relay(METRIC.publishFailures),
            relay(METRIC.eventsDeadLettered),
          ],
        }),
        new cloudwatch.GraphWidget({
          title: "Relay latency (ms)",
          width,
          left: [
            relay(METRIC.batchDuration, "p95"),
            relay(METRIC.publishLag, "p95"),
            relay(METRIC.publishLag, "Maximum"),
          ],
        }),
      ],
      [
        new cloudwatch.GraphWidget({
          title: "Relay Lambda",
          width,
          // The heartbeat and stall the alarms read (stamped while the relay runs) beside Lambda's own figures
          // (stamped with an invocation's start, sent at its end).
          left: [
            relay(METRIC.relayHeartbeat),
            relay(METRIC.relayStalled, "Minimum"),
            relayFunction.metricInvocations(),
            relayFunction.metricErrors(),
          ],
          right: [relayFunction.metricThrottles()],
        }),
        new cloudwatch.GraphWidget({
          title: "Relay Lambda duration (ms)",
          width,
          left: [relayFunction.metricDuration({ statistic: "Maximum" })],
        }),
        new cloudwatch.GraphWidget({
          title: "Purge",
          width,
          left: [perPurge(METRIC.purgedRows), purgeFunction.metricErrors({ period: metricsRate })],
          right: [
            subjects.metric(METRIC.purgeDuration, "purge", { statistic: "Maximum", period: purgeRate }),
          ],
        }),
      ],
      [
        // With a bus there is no queue of the relay's to show: the rules' targets belong to their consumers.
        ...(queue === undefined
          ? []
          : [
              new cloudwatch.GraphWidget({
                title: "Queue",
                width,
                left: [
                  queue.metricApproximateNumberOfMessagesVisible(),
                  queue.metricApproximateAgeOfOldestMessage(),
                ],
                right: [
                  ...(consumerDeadLetterQueue === undefined
                    ? []
                    : [consumerDeadLetterQueue.metricApproximateNumberOfMessagesVisible()]),
                ],
              }),
            ]),
        new cloudwatch.AlarmStatusWidget({ title: "Alarms", width: 16, alarms }),
      ],
      // Behind a route table: what each destination took and refused, by the relay's `destination` dimension.
      ...((subjects.destinations ?? []).length === 0
        ? []
        : [
            [
              new cloudwatch.GraphWidget({
                title: "Published per destination per minute",
                width: 8,
                left: (subjects.destinations ?? []).map((place) =>
                  perDestination(METRIC.eventsPublished, place.metricName),
                ),
              }),
              new cloudwatch.GraphWidget({
                title: "Publish failures per destination per minute",
                width: 8,
                left: (subjects.destinations ?? []).map((place) =>
                  perDestination(METRIC.publishFailures, place.metricName),
                ),
              }),
              // From the purge's snapshot, as its alarms read it (one per destination).
              new cloudwatch.GraphWidget({
                title: "Oldest pending age per destination (s)",
                width: 8,
                left: (subjects.destinations ?? []).map((place) =>
                  subjects
                    .metric(METRIC.oldestPendingAgeSeconds, "purge", {
                      statistic: "Maximum",
                      period: metricsRate,
                      destination: place.metricName,
                    })
                    .with({ label: place.metricName }),
                ),
              }),
            ],
          ]),
    ],
  });
}
