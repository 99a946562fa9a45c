import type { Stack } from "aws-cdk-lib";
import { Annotations, Match, type Template } from "aws-cdk-lib/assertions";
import * as events from "aws-cdk-lib/aws-events";
import * as kinesis from "aws-cdk-lib/aws-kinesis";
import * as sns from "aws-cdk-lib/aws-sns";
import * as sqs from "aws-cdk-lib/aws-sqs";
import { describe, expect, it } from "vitest";
import { EVENTBRIDGE_MAX_REQUEST_BYTES } from "../../functions/shared/destinations/eventBridge/eventBridge.ts";
import { ENVELOPE_MARGIN_BYTES } from "../../functions/shared/destinations/limits.ts";
import { outboxStack as constructStack, type OutboxRelayProps } from "../support/template.ts";

/**
 * Issue 38 ("one effective message limit, from the destination to the producer") and issue 40 item 11: what the
 * construct tells the relay a destination takes, and what it writes to the outbox's limits row for the write
 * API, come from the same place: the queue's template, a prop where the construct cannot read it, the fixed
 * limit of a bus or a stream; never a silent 256 KiB.
 */
const ACCOUNT = "123456789012";
const arn = (service: string, resource: string) => `arn:aws:${service}:eu-west-1:${ACCOUNT}:${resource}`;
const MIB = 1_048_576;

function outboxStack(extra: (stack: Stack) => Partial<OutboxRelayProps>) {
  return constructStack(extra, { name: "Shop", env: { account: ACCOUNT, region: "eu-west-1" } });
}

function relayEnvironment(template: Template): Record<string, unknown> {
  const relay = Object.values(template.findResources("AWS::Lambda::Function")).find(
    (fn) => fn.Properties.Environment?.Variables?.RELAY_BATCH_MAX_BYTES !== undefined,
  );
  return relay?.Properties.Environment.Variables as Record<string, unknown>;
}

const unknownSizeWarnings = (stack: Stack) =>
  Annotations.fromStack(stack).findWarning(
    "*",
    Match.stringLikeRegexp("MaximumMessageSize of .* is not in this app"),
  );

describe("OutboxRelay: the destinations' message limit, for the relay and for the write API", () => {
  it("reads a 1 MiB queue created in the app (not by the construct) as 1 MiB, for the relay and the row", () => {
    const { stack, relay, template } = outboxStack((s) => ({
      destination: new sqs.Queue(s, "Orders", { fifo: true, maxMessageSizeBytes: MIB }),
    }));
    expect(relayEnvironment(template).RELAY_MAX_MESSAGE_BYTES).toBe(String(MIB));
    expect(relay.outboxLimits).toMatchObject({ maxMessageBytes: MIB, claimCheck: false });
    expect(unknownSizeWarnings(stack)).toEqual([]);
  });

  it("reads a queue created in the app without a size as SQS's default, 262,144, without a warning", () => {
    const { stack, relay, template } = outboxStack((s) => ({
      destination: new sqs.Queue(s, "Orders", { fifo: true }),
    }));
    expect(relayEnvironment(template).RELAY_MAX_MESSAGE_BYTES).toBe("262144");
    expect(relay.outboxLimits.maxMessageBytes).toBe(262_144);
    expect(unknownSizeWarnings(stack)).toEqual([]);
  });

  it("takes an imported queue as 262,144 with a warning naming the prop, or as relay.maxMessageBytes says", () => {
    const imported = (s: Stack) => sqs.Queue.fromQueueArn(s, "Orders", arn("sqs", "orders.fifo"));
    const assumed = outboxStack((s) => ({ destination: imported(s) }));
    expect(relayEnvironment(assumed.template).RELAY_MAX_MESSAGE_BYTES).toBe("262144");
    expect(assumed.relay.outboxLimits).toMatchObject({
      maxMessageBytes: 262_144,
      limitedBy: "sqs-fifo:orders.fifo",
    });
    expect(unknownSizeWarnings(assumed.stack)).toHaveLength(1);
    expect(JSON.stringify(unknownSizeWarnings(assumed.stack))).toContain("relay.maxMessageBytes");

    const told = outboxStack((s) => ({ destination: imported(s), relay: { maxMessageBytes: MIB } }));
    expect(relayEnvironment(told.template).RELAY_MAX_MESSAGE_BYTES).toBe(String(MIB));
    expect(told.relay.outboxLimits.maxMessageBytes).toBe(MIB);
    expect(unknownSizeWarnings(told.stack)).toEqual([]);
  });

  it("gives a route to an imported queue or a topic the size of its maxMessageBytes prop", () => {
    const { stack, relay, template } = outboxStack((s) => ({
      routes: [
        {
          match: { aggregateType: "order" },
          destination: sqs.Queue.fromQueueArn(s, "Orders", arn("sqs", "orders.fifo")),
          maxMessageBytes: MIB,
        },
        {
          match: { aggregateType: "payment" },
          destination: sns.Topic.fromTopicArn(s, "Payments", arn("sns", "payments.fifo")),
          maxMessageBytes: 512 * 1024,
        },
      ],
    }));
    // OUTBOX_ROUTES is an Fn::Join (the imported queue's URL has the partition's URL suffix): its text holds them.
    const routes = JSON.stringify(relayEnvironment(template).OUTBOX_ROUTES);
    expect(routes).toContain(`\\"maxMessageBytes\\":${MIB}`);
    expect(routes).toContain(`\\"maxMessageBytes\\":${512 * 1024}`);
    // The write API is held to the tightest place an event can go.
    expect(relay.outboxLimits).toMatchObject({
      maxMessageBytes: 512 * 1024,
      limitedBy: "sns-fifo:payments.fifo",
    });
    expect(unknownSizeWarnings(stack)).toEqual([]);
  });

  it("warns of a route to an imported queue without maxMessageBytes, and holds the write API to 262,144", () => {
    const { stack, relay } = outboxStack((s) => ({
      destination: new sqs.Queue(s, "Default", { fifo: true, maxMessageSizeBytes: MIB }),
      routes: [
        {
          match: { aggregateType: "order" },
          destination: sqs.Queue.fromQueueArn(s, "Orders", arn("sqs", "orders.fifo")),
        },
      ],
    }));
    expect(relay.outboxLimits).toMatchObject({ maxMessageBytes: 262_144, limitedBy: "sqs-fifo:orders.fifo" });
    expect(JSON.stringify(unknownSizeWarnings(stack))).toContain("routes[0] (Shop/Orders)");
  });

  it("keeps an envelope's margin below a bus's or a stream's fixed limit, and refuses a size prop for them", () => {
    const { relay } = outboxStack((s) => ({
      destination: events.EventBus.fromEventBusArn(s, "Bus", arn("events", "event-bus/shop")),
    }));
    expect(relay.outboxLimits.maxMessageBytes).toBe(EVENTBRIDGE_MAX_REQUEST_BYTES - ENVELOPE_MARGIN_BYTES);
    expect(() =>
      outboxStack((s) => ({
        routes: [
          {
            match: { aggregateType: "click" },
            destination: kinesis.Stream.fromStreamArn(s, "Clicks", arn("kinesis", "stream/clicks")),
            maxMessageBytes: MIB,
          },
        ],
      })),
    ).toThrow(/routes\[0\]\.maxMessageBytes applies to a queue or a topic; a stream's limit is fixed/);
  });

  it("turns the claim check on in the row with largePayloads, with its maxPayloadBytes (default 64 MiB)", () => {
    expect(outboxStack(() => ({ largePayloads: {} })).relay.outboxLimits).toMatchObject({
      claimCheck: true,
      maxPayloadBytes: 64 * MIB,
    });
    expect(
      outboxStack(() => ({ largePayloads: { maxPayloadBytes: 8 * MIB } })).relay.outboxLimits,
    ).toMatchObject({
      claimCheck: true,
      maxPayloadBytes: 8 * MIB,
    });
    // The construct's own queue: 1 MiB, named by the name it fixes (not a token).
    expect(outboxStack(() => ({})).relay.outboxLimits).toMatchObject({
      claimCheck: false,
      maxPayloadBytes: MIB,
      maxMessageBytes: MIB,
      limitedBy: expect.stringMatching(/^sqs-fifo:[A-Za-z0-9_-]+-queue\.fifo$/),
    });
  });
});
