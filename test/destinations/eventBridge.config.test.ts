import { describe, expect, it } from "vitest";
import { destinationSettingFromEnv } from "../../functions/shared/destinations/setting.ts";

const QUEUE = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo";

describe("destination setting (OUTBOX_QUEUE_URL or OUTBOX_EVENT_BUS_NAME)", () => {
  it("takes a queue URL as an SQS FIFO destination", () => {
    expect(destinationSettingFromEnv({ OUTBOX_QUEUE_URL: QUEUE })).toEqual({
      kind: "sqs-fifo",
      queueUrl: QUEUE,
      maxMessageBytes: 1_048_576,
    });
    expect(
      destinationSettingFromEnv({ OUTBOX_QUEUE_URL: QUEUE, RELAY_MAX_MESSAGE_BYTES: "262144" }),
    ).toMatchObject({ maxMessageBytes: 262_144 });
  });

  it("takes a bus name or a bus ARN as an EventBridge destination, with the default or configured source", () => {
    expect(destinationSettingFromEnv({ OUTBOX_EVENT_BUS_NAME: "orders" })).toEqual({
      kind: "eventbridge",
      eventBusName: "orders",
      source: "outbox-relay",
    });
    const arn = "arn:aws:events:eu-west-1:123456789012:event-bus/orders";
    expect(
      destinationSettingFromEnv({ OUTBOX_EVENT_BUS_NAME: arn, OUTBOX_EVENT_SOURCE: "com.example.orders" }),
    ).toEqual({ kind: "eventbridge", eventBusName: arn, source: "com.example.orders" });
  });

  it("refuses both or neither, naming both variables", () => {
    expect(() =>
      destinationSettingFromEnv({ OUTBOX_QUEUE_URL: QUEUE, OUTBOX_EVENT_BUS_NAME: "orders" }),
    ).toThrow(/OUTBOX_QUEUE_URL and OUTBOX_EVENT_BUS_NAME are both set; set exactly one/);
    expect(() => destinationSettingFromEnv({})).toThrow(
      /neither OUTBOX_QUEUE_URL nor OUTBOX_EVENT_BUS_NAME is set; set exactly one/,
    );
    // Blank counts as unset, as for every variable.
    expect(() => destinationSettingFromEnv({ OUTBOX_QUEUE_URL: " ", OUTBOX_EVENT_BUS_NAME: "" })).toThrow(
      /neither/,
    );
  });

  it("refuses a malformed bus, a reserved source, and a source without a bus, naming the variable", () => {
    expect(() => destinationSettingFromEnv({ OUTBOX_EVENT_BUS_NAME: "orders bus" })).toThrow(
      /OUTBOX_EVENT_BUS_NAME must be an event bus name .* got "orders bus"/,
    );
    expect(() =>
      destinationSettingFromEnv({ OUTBOX_EVENT_BUS_NAME: "orders", OUTBOX_EVENT_SOURCE: "aws.orders" }),
    ).toThrow(/OUTBOX_EVENT_SOURCE: "aws.orders": the aws. prefix is reserved/);
    expect(() => destinationSettingFromEnv({ OUTBOX_QUEUE_URL: QUEUE, OUTBOX_EVENT_SOURCE: "x" })).toThrow(
      /OUTBOX_EVENT_SOURCE applies only to an EventBridge bus/,
    );
    expect(() =>
      destinationSettingFromEnv({ OUTBOX_EVENT_BUS_NAME: "orders", RELAY_MAX_MESSAGE_BYTES: "262144" }),
    ).toThrow(/RELAY_MAX_MESSAGE_BYTES applies only to an SQS queue/);
    expect(() => destinationSettingFromEnv({ OUTBOX_QUEUE_URL: "orders.fifo" })).toThrow(
      /OUTBOX_QUEUE_URL must be an SQS queue URL/,
    );
  });
});
