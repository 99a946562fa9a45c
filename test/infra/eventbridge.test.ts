import type { Stack } from "aws-cdk-lib";
import { Match, type Template } from "aws-cdk-lib/assertions";
import * as events from "aws-cdk-lib/aws-events";
import * as sqs from "aws-cdk-lib/aws-sqs";
import { describe, expect, it } from "vitest";
import {
  asArray,
  outboxStack as constructStack,
  identityStatements,
  nagFindings,
} from "../support/template.ts";

const BUS_ARN = "arn:aws:events:eu-west-1:210987654321:event-bus/orders";

/** The construct in a stack of its own (account 123456789012), against an imported VPC and secret. */
function outboxStack(extra: Parameters<typeof constructStack>[0]) {
  return constructStack(extra, { name: "Orders", env: { account: "123456789012", region: "eu-west-1" } });
}

function relayEnvironment(template: Template): Record<string, unknown> {
  const relays = Object.values(
    template.findResources("AWS::Lambda::Function", {
      Properties: { Environment: { Variables: Match.objectLike({ RELAY_MODE: Match.anyValue() }) } },
    }),
  ) as { Properties: { Environment: { Variables: Record<string, unknown> } } }[];
  expect(relays).toHaveLength(1);
  return (relays[0] as (typeof relays)[number]).Properties.Environment.Variables;
}

describe("OutboxRelay with an EventBridge bus as its destination", () => {
  it("publishes to the bus: no queue, events:PutEvents on that bus only, the bus and source in the environment", () => {
    const { relay, template } = outboxStack((stack) => ({
      destination: events.EventBus.fromEventBusArn(stack, "Bus", BUS_ARN),
      eventSource: "com.example.orders",
    }));

    template.resourceCountIs("AWS::SQS::Queue", 0);
    expect(relay.queue).toBeUndefined();
    expect(relay.eventBus?.eventBusArn).toBe(BUS_ARN);
    const environment = relayEnvironment(template);
    expect(environment).toMatchObject({
      OUTBOX_EVENT_BUS_NAME: BUS_ARN,
      OUTBOX_EVENT_SOURCE: "com.example.orders",
    });
    expect(environment).not.toHaveProperty("OUTBOX_QUEUE_URL");
    expect(environment).not.toHaveProperty("RELAY_MAX_MESSAGE_BYTES");

    const actions = identityStatements(template).flatMap(({ statement }) =>
      asArray(statement.Action as string | string[]).map((action) => [action, statement.Resource]),
    );
    expect(actions.filter(([action]) => String(action).startsWith("events:"))).toEqual([
      ["events:PutEvents", BUS_ARN],
    ]);
    expect(actions.filter(([action]) => String(action).startsWith("sqs:"))).toEqual([]);
    // The queue alarms have no queue to read; the relay's own alarms (failures, not running, ...) stay.
    template.resourcePropertiesCountIs(
      "AWS::CloudWatch::Alarm",
      { MetricName: "ApproximateAgeOfOldestMessage" },
      0,
    );
    template.hasResourceProperties("AWS::CloudWatch::Alarm", { MetricName: "PublishFailures" });
  });

  it("grants PutEvents on a bus created in the same stack, by its ARN, and passes cdk-nag", () => {
    const { stack, template } = outboxStack((scope) => ({
      destination: new events.EventBus(scope, "OrdersBus", { eventBusName: "orders" }),
    }));

    const [busId] = Object.keys(template.findResources("AWS::Events::EventBus"));
    const busArn = { "Fn::GetAtt": [busId, "Arn"] };
    template.hasResourceProperties("AWS::IAM::Policy", {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Action: "events:PutEvents", Effect: "Allow", Resource: busArn }),
        ]),
      },
    });
    expect(relayEnvironment(template)).toMatchObject({
      OUTBOX_EVENT_BUS_NAME: busArn,
      OUTBOX_EVENT_SOURCE: "outbox-relay",
    });
    expect(nagFindings(stack)).toEqual([]);
  });

  it("still takes a queue as its destination, like the queue prop", () => {
    const { relay, template } = outboxStack((stack) => ({
      destination: sqs.Queue.fromQueueArn(stack, "Q", "arn:aws:sqs:eu-west-1:123456789012:orders.fifo"),
    }));
    expect(relay.eventBus).toBeUndefined();
    const environment = relayEnvironment(template);
    expect(environment).toHaveProperty("OUTBOX_QUEUE_URL");
    expect(environment).not.toHaveProperty("OUTBOX_EVENT_BUS_NAME");
  });

  it("refuses what does not fit a bus, naming the prop", () => {
    const bus = (stack: Stack) => events.EventBus.fromEventBusArn(stack, "Bus", BUS_ARN);
    const queue = (stack: Stack) =>
      sqs.Queue.fromQueueArn(stack, "Q", "arn:aws:sqs:eu-west-1:123456789012:orders.fifo");
    expect(() => outboxStack((stack) => ({ destination: bus(stack), queue: queue(stack) }))).toThrow(
      /set destination or queue, not both/,
    );
    expect(() => outboxStack((stack) => ({ destination: bus(stack), eventSource: "aws.orders" }))).toThrow(
      /eventSource: "aws.orders": the aws. prefix is reserved/,
    );
    expect(() => outboxStack((stack) => ({ destination: queue(stack), eventSource: "orders" }))).toThrow(
      /eventSource applies only to an EventBridge bus/,
    );
    expect(() => outboxStack((stack) => ({ destination: bus(stack), restrictSendToRelay: true }))).toThrow(
      /restrictSendToRelay applies to the queue/,
    );
    expect(() =>
      outboxStack((stack) => ({ destination: bus(stack), relay: { maxMessageBytes: 262_144 } })),
    ).toThrow(/relay.maxMessageBytes applies only to a queue/);
    expect(() =>
      outboxStack((stack) => ({
        destination: bus(stack),
        consumer: { entry: "test/fixtures/consumerHandler.ts" },
      })),
    ).toThrow(/consumer reads the relay's queue; with a bus destination/);
  });
});
