import type { InboxEvent, SqsRecord } from "../../functions/shared/consumer/index.ts";

/** A bare SQS record: the unit tests look at its id and group only. */
export function sqsRecord(messageId: string, groupId?: string): SqsRecord {
  return {
    messageId,
    receiptHandle: messageId,
    body: "{}",
    attributes: {
      ApproximateReceiveCount: "1",
      SentTimestamp: "0",
      ...(groupId === undefined ? {} : { MessageGroupId: groupId }),
    },
    messageAttributes: {},
    eventSource: "aws:sqs",
    eventSourceARN: "arn:aws:sqs:us-east-1:000000000000:q.fifo",
    awsRegion: "us-east-1",
  };
}

/** An already parsed event, as the router and the payload parser receive one. */
export function inboxEvent(overrides: Partial<InboxEvent> = {}): InboxEvent {
  return {
    id: "0b8f7a2e-3c1d-4e5f-9a6b-7c8d9e0f1a2b",
    eventType: "order.placed",
    aggregateType: "order",
    aggregateId: "o-1",
    createdAt: new Date("2026-12-01T10:00:00.000Z"),
    seq: 42n,
    origin: "arn:aws:sqs:us-east-1:000000000000:q.fifo",
    sequenceNumber: 1n,
    headers: {},
    payload: { orderId: "o-1", total: 5 },
    trace: {},
    delivery: { messageId: "m-1", receiveCount: 1 },
    ...overrides,
  };
}
