import { describe, expect, it } from "vitest";
import { parseInboxEvent, type SqsRecord } from "../../functions/shared/consumer/index.ts";
import { messageAttributes } from "../../functions/shared/outbox/message.ts";
import { lambdaMessageAttributes } from "../support/consumer.ts";

const ID = "0b8f7a2e-3c1d-4e5f-9a6b-7c8d9e0f1a2b";

/** A record as Lambda delivers one of the relay's messages (attributes from the relay's own builder). */
function relayRecord(
  overrides: { attributes?: Partial<SqsRecord["attributes"]>; body?: string } = {},
): SqsRecord {
  const body = overrides.body ?? JSON.stringify({ orderId: "o-1" });
  const attributes = messageAttributes({
    id: ID,
    aggregateType: "order",
    aggregateId: "o-1",
    eventType: "order.placed",
    createdAt: new Date("2026-12-01T10:00:00.000Z"),
    seq: "42",
    headers: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" },
    body,
  });
  return {
    messageId: "m-1",
    receiptHandle: "r-1",
    body,
    attributes: {
      ApproximateReceiveCount: "3",
      SentTimestamp: "0",
      SequenceNumber: "18889551798372123392",
      MessageGroupId: "o-1",
      AWSTraceHeader: "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
      ...overrides.attributes,
    },
    messageAttributes: lambdaMessageAttributes(attributes),
    eventSource: "aws:sqs",
    eventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:orders.fifo",
    awsRegion: "eu-west-1",
  };
}

describe("parseInboxEvent", () => {
  it("reads back what the relay's message builder wrote, with X-Ray's system attribute as trace context", () => {
    const event = parseInboxEvent(relayRecord());
    expect(event).toEqual({
      id: ID,
      eventType: "order.placed",
      aggregateType: "order",
      aggregateId: "o-1",
      createdAt: new Date("2026-12-01T10:00:00.000Z"),
      seq: 42n,
      // The queue the record was read from: the relay publishes one outbox to a queue.
      origin: "arn:aws:sqs:eu-west-1:123456789012:orders.fifo",
      sequenceNumber: 18889551798372123392n,
      headers: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" },
      payload: { orderId: "o-1" },
      trace: {
        awsTraceHeader: "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
        traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      },
      delivery: { messageId: "m-1", receiveCount: 3 },
    });
  });

  it("names the field when a message is not one the relay sent", () => {
    const record = relayRecord();
    delete record.messageAttributes.outboxId;
    expect(() => parseInboxEvent(record)).toThrow(/messageAttributes\.outboxId: is missing/);
    const notUuid = relayRecord();
    notUuid.messageAttributes.outboxId = { dataType: "String", stringValue: "42" };
    expect(() => parseInboxEvent(notUuid)).toThrow(/messageAttributes\.outboxId: is not a uuid/);
    expect(() => parseInboxEvent(relayRecord({ body: "{not json" }))).toThrow(/body: is not JSON/);
  });

  it("reads the relay's message from a standard queue (an sqs or sns route): no sequence number, no failure", () => {
    const event = parseInboxEvent(relayRecord({ attributes: { SequenceNumber: undefined } }));
    expect(event).toMatchObject({ id: ID, seq: 42n, sequenceNumber: undefined, payload: { orderId: "o-1" } });
  });
});
