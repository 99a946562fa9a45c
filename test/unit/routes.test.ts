import { describe, expect, it } from "vitest";
import { compileMatch, parseRoutes } from "../../functions/shared/destinations/routing/routes.ts";
import { destinationSettingFromEnv } from "../../functions/shared/destinations/setting.ts";
import { ConfigError } from "../../functions/shared/outbox/errors.ts";

const QUEUE = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo";
const STANDARD = "https://sqs.eu-west-1.amazonaws.com/123456789012/audit";
const TOPIC = "arn:aws:sns:eu-west-1:123456789012:payments.fifo";
const STREAM = "arn:aws:kinesis:eu-west-1:123456789012:stream/clicks";

const routes = (...table: unknown[]) => JSON.stringify(table);
const refused = (table: unknown[]) => () => parseRoutes(JSON.stringify(table));

describe("OUTBOX_ROUTES: the route table read at cold start", () => {
  it("reads every kind, patterns as string or list, a catch-all last", () => {
    const table = parseRoutes(
      routes(
        { match: { aggregateType: "order" }, destination: { kind: "sqs-fifo", queueUrl: QUEUE } },
        {
          match: { eventType: ["payment.*", "refund.issued"] },
          destination: { kind: "sns-fifo", topicArn: TOPIC },
        },
        { match: { aggregateType: "click" }, destination: { kind: "kinesis", streamArn: STREAM } },
        { match: { aggregateType: "session" }, destination: { kind: "kinesis", streamName: "sessions" } },
        {
          match: { aggregateType: "user" },
          destination: { kind: "eventbridge", busName: "users", source: "com.x" },
        },
        { match: {}, destination: { kind: "sqs", queueUrl: STANDARD } },
      ),
    );
    expect(table.map((route) => route.destination)).toEqual([
      { kind: "sqs-fifo", queueUrl: QUEUE, maxMessageBytes: 1_048_576 },
      { kind: "sns-fifo", topicArn: TOPIC, maxMessageBytes: 262_144 },
      { kind: "kinesis", stream: { streamArn: STREAM } },
      { kind: "kinesis", stream: { streamName: "sessions" } },
      { kind: "eventbridge", eventBusName: "users", source: "com.x" },
      { kind: "sqs", queueUrl: STANDARD, maxMessageBytes: 1_048_576 },
    ]);
    expect(table[1]?.match).toEqual({ eventType: ["payment.*", "refund.issued"] });
  });

  it("matches literals and * wildcards, a missing field matching everything", () => {
    const payments = compileMatch({ aggregateType: ["order", "cart"], eventType: ["payment.*"] });
    expect(payments("order", "payment.captured")).toBe(true);
    expect(payments("cart", "payment.")).toBe(true);
    expect(payments("order", "order.created")).toBe(false);
    expect(payments("orders", "payment.captured")).toBe(false);
    expect(compileMatch({ eventType: ["*.created"] })("anything", "order.created")).toBe(true);
    expect(compileMatch({ eventType: ["a.b"] })("x", "aXb")).toBe(false); // `.` is literal
    expect(compileMatch({})("x", "y")).toBe(true);
  });

  it.each([
    ["not JSON", "[{", /OUTBOX_ROUTES is not valid JSON/],
    ["not an array", "{}", /OUTBOX_ROUTES must be a JSON array of routes, got object/],
    ["empty", "[]", /OUTBOX_ROUTES is an empty list/],
  ])("refuses a table that is %s", (_, text, error) => {
    expect(() => parseRoutes(text)).toThrow(error);
  });

  it.each([
    [
      "an unknown kind",
      [{ match: {}, destination: { kind: "sqs-fifoo", queueUrl: QUEUE } }],
      'OUTBOX_ROUTES[0].destination.kind: unknown kind "sqs-fifoo"; one of sqs-fifo, sqs, sns-fifo, sns, kinesis, eventbridge',
    ],
    [
      "a bad queue URL",
      [{ match: {}, destination: { kind: "sqs-fifo", queueUrl: "orders.fifo" } }],
      "OUTBOX_ROUTES[0].destination.queueUrl must be an SQS queue URL",
    ],
    [
      "a standard queue on a FIFO kind",
      [{ match: {}, destination: { kind: "sqs-fifo", queueUrl: STANDARD } }],
      "OUTBOX_ROUTES[0].destination.queueUrl: a FIFO queue's name ends in .fifo; for a standard queue use kind sqs",
    ],
    [
      "a FIFO queue on the standard kind",
      [{ match: {}, destination: { kind: "sqs", queueUrl: QUEUE } }],
      "is a FIFO queue (.fifo), a FIFO-only target for a standard kind: use kind sqs-fifo",
    ],
    [
      "a FIFO topic on the standard kind",
      [{ match: {}, destination: { kind: "sns", topicArn: TOPIC } }],
      "OUTBOX_ROUTES[0].destination.topicArn",
    ],
    [
      "a group id on a standard target",
      [{ match: {}, destination: { kind: "sqs", queueUrl: STANDARD, messageGroupId: "g" } }],
      "OUTBOX_ROUTES[0].destination.messageGroupId: a FIFO-only option on a standard target (kind sqs)",
    ],
    [
      "a bad topic ARN",
      [{ match: {}, destination: { kind: "sns-fifo", topicArn: "payments.fifo" } }],
      "OUTBOX_ROUTES[0].destination.topicArn must be an SNS topic ARN",
    ],
    [
      "a bad stream ARN",
      [{ match: {}, destination: { kind: "kinesis", streamArn: "arn:aws:sqs:eu-west-1:123456789012:x" } }],
      "OUTBOX_ROUTES[0].destination.streamArn must be a Kinesis stream ARN",
    ],
    [
      "both a stream ARN and a name",
      [{ match: {}, destination: { kind: "kinesis", streamArn: STREAM, streamName: "clicks" } }],
      "OUTBOX_ROUTES[0].destination: set exactly one of streamArn and streamName",
    ],
    [
      "a bus named wrong",
      [{ match: {}, destination: { kind: "eventbridge", busName: "a bus" } }],
      "OUTBOX_ROUTES[0].destination.busName must be an event bus name",
    ],
    [
      "an aws. source",
      [{ match: {}, destination: { kind: "eventbridge", busName: "b", source: "aws.x" } }],
      "OUTBOX_ROUTES[0].destination.source",
    ],
    [
      "an unknown field of a kind",
      [{ match: {}, destination: { kind: "kinesis", streamName: "s", queueUrl: QUEUE } }],
      "OUTBOX_ROUTES[0].destination.queueUrl: unknown field for kind kinesis (it takes streamArn, streamName)",
    ],
    [
      "a misspelt route field",
      [{ match: {}, destinaton: { kind: "sqs", queueUrl: STANDARD } }],
      "OUTBOX_ROUTES[0].destinaton: unknown field (it takes match, destination)",
    ],
    [
      "a misspelt match field",
      [{ match: { eventtype: "x" }, destination: { kind: "sqs", queueUrl: STANDARD } }],
      "OUTBOX_ROUTES[0].match.eventtype: unknown field (it takes aggregateType, eventType)",
    ],
    [
      "no match",
      [{ destination: { kind: "sqs", queueUrl: STANDARD } }],
      'OUTBOX_ROUTES[0]: match is missing (use "match": {} to match every event)',
    ],
    [
      "an empty pattern list",
      [{ match: { eventType: [] }, destination: { kind: "sqs", queueUrl: STANDARD } }],
      "OUTBOX_ROUTES[0].match.eventType must be a pattern or a non-empty array of patterns",
    ],
    [
      "a size over the kind's limit",
      [
        {
          match: {},
          destination: {
            kind: "sns",
            topicArn: "arn:aws:sns:eu-west-1:123456789012:t",
            maxMessageBytes: 2_000_000,
          },
        },
      ],
      "OUTBOX_ROUTES[0].destination.maxMessageBytes must be an integer from 1024 to 1048576",
    ],
  ])("refuses %s, naming the route and the field", (_, table, message) => {
    expect(refused(table)).toThrow(ConfigError);
    expect(refused(table)).toThrow(message);
  });

  const to = { kind: "sqs", queueUrl: STANDARD };
  it.each([
    [
      "a route after a catch-all",
      [
        { match: {}, destination: to },
        { match: { aggregateType: "order" }, destination: to },
      ],
      "OUTBOX_ROUTES[1] is unreachable: OUTBOX_ROUTES[0] before it matches every event (a catch-all must be the last route)",
    ],
    [
      "a route after a wildcard catch-all",
      [
        { match: { aggregateType: "*", eventType: ["*"] }, destination: to },
        { match: { eventType: "x" }, destination: to },
      ],
      "OUTBOX_ROUTES[1] is unreachable: OUTBOX_ROUTES[0] before it matches every event",
    ],
    [
      "a duplicate",
      [
        { match: { aggregateType: ["order", "cart"] }, destination: to },
        { match: { aggregateType: ["cart", "order"] }, destination: { kind: "sqs-fifo", queueUrl: QUEUE } },
      ],
      "OUTBOX_ROUTES[1] duplicates the match of OUTBOX_ROUTES[0]: it can never be reached",
    ],
    [
      "a route shadowed by a wider prefix",
      [
        { match: { eventType: "payment.*" }, destination: to },
        {
          match: { aggregateType: "order", eventType: ["payment.card.*", "payment.refunded"] },
          destination: to,
        },
      ],
      "OUTBOX_ROUTES[1] is unreachable: every event it matches is taken first by OUTBOX_ROUTES[0] (first match wins; put the narrower route first)",
    ],
    [
      "a route shadowed by a suffix wildcard",
      [
        { match: { eventType: "*.created" }, destination: to },
        { match: { eventType: "order.created" }, destination: to },
      ],
      "OUTBOX_ROUTES[1] is unreachable",
    ],
  ])("refuses %s", (_, table, message) => {
    expect(refused(table)).toThrow(message);
  });

  it("accepts routes an earlier one only partly overlaps", () => {
    expect(
      parseRoutes(
        routes(
          { match: { aggregateType: "order", eventType: "payment.*" }, destination: to },
          { match: { eventType: "payment.*" }, destination: to },
          { match: { eventType: "pay*" }, destination: to },
          { match: { aggregateType: "order" }, destination: to },
          { match: {}, destination: to },
        ),
      ),
    ).toHaveLength(5);
  });
});

describe("the destination settings with OUTBOX_ROUTES", () => {
  const table = routes({
    match: { aggregateType: "order" },
    destination: { kind: "sqs-fifo", queueUrl: QUEUE },
  });

  it("makes the queue or bus optional, the default for unmatched events when set", () => {
    expect(destinationSettingFromEnv({ OUTBOX_ROUTES: table })).toEqual({
      kind: "routes",
      routes: parseRoutes(table),
    });
    expect(
      destinationSettingFromEnv({ OUTBOX_ROUTES: table, OUTBOX_EVENT_BUS_NAME: "fallback" }),
    ).toMatchObject({ kind: "routes", fallback: { kind: "eventbridge", eventBusName: "fallback" } });
    expect(() =>
      destinationSettingFromEnv({
        OUTBOX_ROUTES: table,
        OUTBOX_QUEUE_URL: QUEUE,
        OUTBOX_EVENT_BUS_NAME: "b",
      }),
    ).toThrow(/both set/);
  });

  it("refuses a default-only option without a default, and names OUTBOX_ROUTES when nothing is set", () => {
    expect(() =>
      destinationSettingFromEnv({ OUTBOX_ROUTES: table, RELAY_MAX_MESSAGE_BYTES: "2048" }),
    ).toThrow("RELAY_MAX_MESSAGE_BYTES applies only to the default destination");
    expect(() => destinationSettingFromEnv({})).toThrow(/or OUTBOX_ROUTES, a route table/);
    expect(() => destinationSettingFromEnv({ OUTBOX_ROUTES: "[1]" })).toThrow(
      "OUTBOX_ROUTES[0] must be an object, got number",
    );
  });
});
