import { Aspects, Stack } from "aws-cdk-lib";
import type * as cloudwatch from "aws-cdk-lib/aws-cloudwatch";
import * as events from "aws-cdk-lib/aws-events";
import type * as kinesis from "aws-cdk-lib/aws-kinesis";
import * as sns from "aws-cdk-lib/aws-sns";
import type { Construct, IConstruct } from "constructs";
import {
  createAlarmsFrom,
  type DestinationConsumerSubjects,
  destinationConsumerAlarmTable,
} from "./alarms.ts";
import type { RoutedPlace } from "./routes.ts";

/**
 * The readers' side of the places the relay publishes to, beyond queues: the routed topics and streams (known when
 * the construct is made), and what hangs off the topics and buses in the relay's stack (subscriptions with a
 * dead-letter queue, rules on the bus), found when the app is synthesized, so a rule or subscription defined after
 * the OutboxRelay counts too. Only the relay's stack: an alarm here naming another stack's rule would make the two
 * stacks refer to each other (the rule's stack already refers to the bus or topic it uses).
 */
export interface DestinationConsumerPlaces {
  places: readonly Pick<RoutedPlace, "target" | "kind" | "label">[];
}

/** The places whose readers' side CloudWatch shows: the routed topics, streams and buses, and a default bus. */
export function destinationConsumerPlaces(
  routed: readonly RoutedPlace[],
  defaultBus: events.IEventBus | undefined,
): DestinationConsumerPlaces["places"] {
  if (defaultBus === undefined || routed.some((place) => place.target === defaultBus)) return routed;
  return [...routed, { target: defaultBus, kind: "eventbridge", label: "Default" }];
}

/** The routed topics and streams, for the construct's alarm table. */
export function destinationConsumers(
  places: DestinationConsumerPlaces["places"],
): DestinationConsumerSubjects {
  return {
    topics: places
      .filter(({ kind }) => kind === "sns" || kind === "sns-fifo")
      .map(({ label, target }) => ({ label, topic: target as sns.ITopic })),
    streams: places
      .filter(({ kind }) => kind === "kinesis")
      .map(({ label, target }) => ({ label, stream: target as kinesis.IStream })),
  };
}

/**
 * At synthesis (an aspect on `scope`, run once): the alarms of the rules on the buses and of the topics'
 * subscription dead-letter queues found in the stack, made under `scope` and handed to `created` (which adds them
 * to the construct's alarms and the alarm topic). The construct's own rules (its schedules, on the default bus)
 * are not a consumer's.
 */
export function alarmFoundConsumers(
  scope: Construct,
  places: DestinationConsumerPlaces["places"],
  created: (alarms: Record<string, cloudwatch.Alarm>) => void,
): void {
  const buses = places.filter(({ kind }) => kind === "eventbridge");
  const topics = places.filter(({ kind }) => kind === "sns" || kind === "sns-fifo");
  if (buses.length === 0 && topics.length === 0) return;
  Aspects.of(scope).add({
    visit(node: IConstruct) {
      if (node !== scope) return;
      const found = Stack.of(scope)
        .node.findAll()
        .filter((construct) => !construct.node.path.startsWith(`${scope.node.path}/`));
      const subjects: DestinationConsumerSubjects = {
        busRules: buses.flatMap(({ label, target }) =>
          rulesOn(found, target as events.IEventBus).map((rule) => ({
            label: `${label}${idOf(rule)}`,
            dimensions: ruleDimensions(target as events.IEventBus, rule),
          })),
        ),
        subscriptionDeadLetterQueues: topics.flatMap(({ label, target }) =>
          found
            .filter(
              (construct): construct is sns.Subscription =>
                construct instanceof sns.Subscription &&
                construct.deadLetterQueue !== undefined &&
                sameValue(
                  (construct.node.defaultChild as sns.CfnSubscription).topicArn,
                  (target as sns.ITopic).topicArn,
                ),
            )
            .map((subscription) => ({
              label: `${label}${idOf(subscription)}`,
              queue: subscription.deadLetterQueue as NonNullable<sns.Subscription["deadLetterQueue"]>,
            })),
        ),
      };
      created(createAlarmsFrom(scope, uniquelyLabelled(destinationConsumerAlarmTable(subjects))));
    },
  });
}

/** The rules of `found` on `bus`: a rule of the default bus names none. */
function rulesOn(found: IConstruct[], bus: events.IEventBus): events.Rule[] {
  const defaultBus = bus.eventBusName === "default";
  return found.filter((construct): construct is events.Rule => {
    if (!(construct instanceof events.Rule)) return false;
    const busName = (construct.node.defaultChild as events.CfnRule).eventBusName;
    return busName === undefined ? defaultBus : sameValue(busName, bus.eventBusName);
  });
}

/**
 * A rule's metrics: by RuleName on the default bus, by EventBusName and RuleName on a custom one ("Metrics that
 * specify both the EventBusName and RuleName dimensions refer to a custom event bus", EventBridge user guide,
 * "Monitoring Amazon EventBridge").
 */
function ruleDimensions(bus: events.IEventBus, rule: events.Rule): Record<string, string> {
  return bus.eventBusName === "default"
    ? { RuleName: rule.ruleName }
    : { EventBusName: bus.eventBusName, RuleName: rule.ruleName };
}

/** The same literal, or the same reference: a token's text names the one value it stands for. */
function sameValue(a: unknown, b: string): boolean {
  return typeof a === "string" && a === b;
}

function idOf(construct: IConstruct): string {
  return construct.node.id.replace(/[^A-Za-z0-9]/g, "");
}

/** Two rows with the same id (rules of the same id in different scopes) get an index appended. */
function uniquelyLabelled<T extends { key: string; id: string }>(rows: T[]): T[] {
  const seen = new Set<string>();
  return rows.map((row, index) => {
    if (!seen.has(row.id)) {
      seen.add(row.id);
      return row;
    }
    return { ...row, key: `${row.key}${index}`, id: row.id.replace(/Alarm$/, `${index}Alarm`) };
  });
}
