import { Duration } from "aws-cdk-lib";
import * as events from "aws-cdk-lib/aws-events";
import * as targets from "aws-cdk-lib/aws-events-targets";
import type * as lambda from "aws-cdk-lib/aws-lambda";
import type { Construct } from "constructs";

/**
 * EventBridge invokes asynchronously. A tick that cannot start within a minute (throttled) is worth nothing once
 * the next tick has come, and a failed one is not retried: the next tick is the retry. Lambda's defaults
 * (2 retries, events kept 6 hours) would queue stale ticks into exactly the pile-up reserved concurrency prevents.
 */
const STALE_TICK = { retryAttempts: 0, maxEventAge: Duration.seconds(60) } as const;

export function dropStaleTicks(fn: lambda.Function): void {
  fn.configureAsyncInvoke(STALE_TICK);
}

/**
 * The relay's schedule: one rule with `relays` targets, all the same function, so each tick starts `relays`
 * invocations at once and one rule's FailedInvocations metric covers them all.
 *
 * Scheduled rules rather than EventBridge Scheduler (aws-scheduler, which AWS recommends for new schedules):
 * Scheduler fires within the same minute-wide window, so the timing arithmetic is the same; it needs an extra
 * IAM role that it assumes to invoke the function, and one schedule per target, where a rule takes up to five.
 */
export function relayRule(
  scope: Construct,
  fn: lambda.IFunction,
  rate: Duration,
  relays: number,
): events.Rule {
  return new events.Rule(scope, "RelaySchedule", {
    description: `Starts ${relays === 1 ? "the outbox relay" : `${relays} outbox relays`} every ${rate.toHumanString()}`,
    schedule: events.Schedule.rate(rate),
    // Each target names its relay slot: an invocation hands over only to a later one of its own slot, so
    // `relays` slots keep `relays` invocations claiming (functions/shared/relay/handover.ts).
    targets: Array.from(
      { length: relays },
      (_, relaySlot) =>
        new targets.LambdaFunction(fn, {
          ...STALE_TICK,
          event: events.RuleTargetInput.fromObject({ relaySlot }),
        }),
    ),
  });
}

export function purgeRules(
  scope: Construct,
  fn: lambda.IFunction,
  purgeRate: Duration,
  metricsRate: Duration,
): { purgeRule: events.Rule; metricsRule: events.Rule } {
  const purgeRule = new events.Rule(scope, "PurgeSchedule", {
    description: `Starts the outbox purge every ${purgeRate.toHumanString()}`,
    schedule: events.Schedule.rate(purgeRate),
    targets: [new targets.LambdaFunction(fn, STALE_TICK)],
  });
  // The backlog gauges must be fresher than an hourly purge: the same Lambda, asked for the snapshot only.
  const metricsRule = new events.Rule(scope, "MetricsSchedule", {
    description: `Measures the outbox (purge Lambda, snapshot only) every ${metricsRate.toHumanString()}`,
    schedule: events.Schedule.rate(metricsRate),
    targets: [
      new targets.LambdaFunction(fn, {
        ...STALE_TICK,
        event: events.RuleTargetInput.fromObject({ snapshotOnly: true }),
      }),
    ],
  });
  return { purgeRule, metricsRule };
}
