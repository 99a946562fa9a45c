import { type Message, SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { pollOnce, toSqsEvent } from "../../cli/dev/aws/sqsEventSource.ts";
import {
  createInboxHandler,
  type InboxEvent,
  type InboxRecordHandler,
  parseInboxEvent,
  type SqsRecord,
} from "../../functions/shared/consumer/index.ts";
import {
  detailEnvelope,
  eventBridgeDestination,
} from "../../functions/shared/destinations/eventBridge/eventBridge.ts";
import { CONSUMER_SCHEMA, createConsumerTables, effects, inboxIds, recorder } from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";
import {
  aLoadedRow,
  createBusToQueue,
  eventBridgeClient,
  type FakeBus,
  startFakeBus,
} from "../support/eventBridge.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { drainUntilEmpty, testRelayOptions } from "../support/relay.ts";
import { sqsClient } from "../support/sqs.ts";

const db = useTestDatabase();
const SOURCE = "com.example.orders";
const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

const writeEffect: InboxRecordHandler = async (event, { client }) => {
  await client.query(
    `insert into ${CONSUMER_SCHEMA}.effects (outbox_id, aggregate_id, event_type) values ($1, $2, $3)`,
    [event.id, event.aggregateId, event.eventType],
  );
};

/** writeEffect, keeping each event the handler was given. */
const keeping =
  (seen: InboxEvent[]): InboxRecordHandler =>
  async (event, context) => {
    seen.push(event);
    await writeEffect(event, context);
  };

/** Polls the rule's queue until `count` messages were handed to `handler`; returns them as received. */
async function consume(
  sqs: SQSClient,
  queueUrl: string,
  handler: ReturnType<typeof createInboxHandler>,
  count: number,
): Promise<Message[]> {
  const received: Message[] = [];
  for (let empty = 0; received.length < count && empty < 20; ) {
    const result = await pollOnce(sqs, queueUrl, handler, { waitSeconds: 1 });
    received.push(...result.messages);
    empty = result.received === 0 ? empty + 1 : 0;
  }
  return received;
}

describe("consuming the relay's events from an EventBridge rule's queue (in-process endpoint)", () => {
  let bus: FakeBus;

  beforeAll(async () => {
    bus = await startFakeBus(SOURCE, "inbox-bus");
  });
  afterAll(() => bus.close());
  beforeEach(async () => {
    await db.pool.query("delete from outbox_events");
    await db.pool.query(`drop schema if exists ${CONSUMER_SCHEMA} cascade`);
    await createConsumerTables(db.pool);
  });

  const publish = async (events: ReturnType<typeof anEvent>[]) => {
    const written = await enqueueCommitted(db.pool, events);
    const destination = eventBridgeDestination(bus.events, { eventBusName: bus.busName, source: SOURCE });
    await drainUntilEmpty(db.pool, destination, testRelayOptions("unused-with-a-bus"));
    return written;
  };

  it("applies every event once, as the typed event the SQS path gives, trace context from AWSTraceHeader", async () => {
    const written = await publish(
      Array.from({ length: 30 }, (_, i) =>
        anEvent({
          aggregateId: `eb-order-${i % 5}`,
          eventType: "order.placed",
          payload: { n: i },
          headers: { traceparent: TRACEPARENT, tenant: "t-1" },
        }),
      ),
    );
    const seen: InboxEvent[] = [];
    const handler = createInboxHandler(keeping(seen), { pool: db.pool, schema: CONSUMER_SCHEMA });

    const received = await consume(bus.sqs, bus.queueUrl, handler, 30);

    expect(received).toHaveLength(30);
    expect((await effects(db.pool)).sort()).toEqual(written.map((row) => row.id).sort());
    const first = seen.find((event) => event.id === written[0]?.id);
    expect(first).toMatchObject({
      eventType: "order.placed",
      aggregateType: "order",
      aggregateId: "eb-order-0",
      seq: BigInt(written[0]?.seq ?? -1),
      sequenceNumber: undefined, // a standard queue: no FIFO sequence number, and no failure for it
      payload: { n: 0 },
      headers: { traceparent: TRACEPARENT, tenant: "t-1" },
      trace: {
        // The relay turned the traceparent into the event's TraceHeader; EventBridge handed it to the queue.
        awsTraceHeader: "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1",
        traceparent: TRACEPARENT,
      },
      delivery: { receiveCount: 1 },
    });
    expect(first?.createdAt).toBeInstanceOf(Date);
  });

  it("skips a second delivery of the same outbox id (EventBridge is at least once): applied once", async () => {
    const written = await publish(
      Array.from({ length: 6 }, (_, i) => anEvent({ aggregateId: `dup-${i % 2}` })),
    );
    const log = recorder();
    const handler = createInboxHandler(writeEffect, {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      onOutcome: log.onOutcome,
    });
    const first = await consume(bus.sqs, bus.queueUrl, handler, 6);
    // The bus delivering each event again, as a target retry does: the same event JSON, a new SQS message.
    for (const message of first) {
      await bus.sqs.send(new SendMessageCommand({ QueueUrl: bus.queueUrl, MessageBody: message.Body }));
    }

    const second = await consume(bus.sqs, bus.queueUrl, handler, 6);

    expect(second).toHaveLength(6);
    const count = (status: string) => log.outcomes.filter((outcome) => outcome.status === status).length;
    expect({ processed: count("processed"), duplicate: count("duplicate"), failed: count("failed") }).toEqual(
      {
        processed: 6,
        duplicate: 6,
        failed: 0,
      },
    );
    expect((await effects(db.pool)).sort()).toEqual(written.map((row) => row.id).sort());
  });

  it("fails a malformed envelope naming the field, and lets the other records of the batch through", async () => {
    await publish([anEvent({ aggregateId: "fine-1" }), anEvent({ aggregateId: "fine-2" })]);
    const log = recorder();
    const handler = createInboxHandler(writeEffect, { pool: db.pool, schema: CONSUMER_SCHEMA, ...log });
    const broken = JSON.parse(eventBridgeBody()) as { detail: Record<string, unknown> };
    broken.detail.seq = "not-a-number";
    await bus.sqs.send(
      new SendMessageCommand({ QueueUrl: bus.queueUrl, MessageBody: JSON.stringify(broken) }),
    );

    const received = await consume(bus.sqs, bus.queueUrl, handler, 3);

    expect(received).toHaveLength(3);
    const failed = log.outcomes.filter((outcome) => outcome.status === "failed");
    expect(failed).toHaveLength(1);
    expect(String((failed[0] as { error: unknown }).error)).toMatch(/body\.detail\.seq: is not an order key/);
    expect(await inboxIds(db.pool)).toHaveLength(2);
  });
});

describe("consuming through a rule on the emulator (moto or LocalStack)", () => {
  const events = eventBridgeClient();
  const sqs = sqsClient();
  afterAll(() => {
    events.destroy();
    sqs.destroy();
  });

  it("reads real PutEvents deliveries back as InboxEvents and applies each once", async () => {
    await db.pool.query("delete from outbox_events");
    await db.pool.query(`drop schema if exists ${CONSUMER_SCHEMA} cascade`);
    await createConsumerTables(db.pool);
    const { busName, queueUrl } = await createBusToQueue(events, sqs, SOURCE, "inbox-emulator");
    const written = await enqueueCommitted(
      db.pool,
      Array.from({ length: 3 }, (_, i) => anEvent({ aggregateId: `emu-${i}`, payload: { i } })),
    );
    // moto routes an event to an SQS target in ~0.6 s: a generous publish timeout, as in eventBridge.relay.test.
    await drainUntilEmpty(
      db.pool,
      eventBridgeDestination(events, { eventBusName: busName, source: SOURCE }),
      testRelayOptions("unused-with-a-bus", { publishTimeoutMs: 30_000 }),
    );
    const seen: InboxEvent[] = [];
    const handler = createInboxHandler(keeping(seen), { pool: db.pool, schema: CONSUMER_SCHEMA });

    await consume(sqs, queueUrl, handler, 3);

    expect((await effects(db.pool)).sort()).toEqual(written.map((row) => row.id).sort());
    expect(seen.map((event) => [event.aggregateId, event.payload, event.seq]).sort()).toEqual(
      written.map((row, i) => [`emu-${i}`, { i }, BigInt(row.seq)]).sort(),
    );
  });
});

/** The body of an SQS message an EventBridge rule delivered: the event JSON around the relay's envelope. */
function eventBridgeBody(overrides: Record<string, unknown> = {}): string {
  const row = aLoadedRow({ headers: { traceparent: TRACEPARENT } });
  return JSON.stringify({
    version: "0",
    id: "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
    "detail-type": row.event_type,
    source: SOURCE,
    account: "123456789012",
    time: "2026-12-01T10:00:00Z",
    region: "eu-west-1",
    resources: [],
    detail: JSON.parse(detailEnvelope(row, new Date(row.created_at), { traceparent: TRACEPARENT })),
    ...overrides,
  });
}

function eventBridgeRecord(body: string, attributes: Partial<SqsRecord["attributes"]> = {}): SqsRecord {
  return toSqsEvent("https://sqs.eu-west-1.amazonaws.com/123456789012/orders", [
    {
      MessageId: "m-1",
      ReceiptHandle: "r-1",
      Body: body,
      Attributes: { ApproximateReceiveCount: "2", SentTimestamp: "0", ...attributes } as Record<
        string,
        string
      >,
    },
  ]).Records[0] as SqsRecord;
}

function withDetail(change: (detail: Record<string, unknown>) => void): string {
  const event = JSON.parse(eventBridgeBody()) as { detail: Record<string, unknown> };
  change(event.detail);
  return JSON.stringify(event);
}

describe("parseInboxEvent with an EventBridge event as the body", () => {
  it("reads the envelope: id, order key, payload, headers; the FIFO sequence number when the queue has one", () => {
    const standard = parseInboxEvent(eventBridgeRecord(eventBridgeBody()));
    const fifo = parseInboxEvent(
      eventBridgeRecord(eventBridgeBody(), { SequenceNumber: "18889551798372123392" }),
    );

    expect(standard).toMatchObject({
      eventType: "order.created",
      aggregateType: "order",
      payload: { total: 4200 },
      headers: { traceparent: TRACEPARENT },
      trace: { traceparent: TRACEPARENT },
      sequenceNumber: undefined,
      delivery: { messageId: "m-1", receiveCount: 2 },
    });
    expect(standard.id).toMatch(/^00000000-0000-4000-8000-/);
    expect(typeof standard.seq).toBe("bigint");
    expect(fifo.sequenceNumber).toBe(18889551798372123392n);
  });

  it.each([
    ["body.detail", () => eventBridgeBody({ detail: "not an object" }), /body\.detail: is the string/],
    ["body.detail-type", () => eventBridgeBody({ "detail-type": 7 }), /body\.detail-type: is a number/],
    ["body.source", () => eventBridgeBody({ source: "" }), /body\.source: is the string ""/],
    [
      "body.detail.outboxId",
      () => withDetail((d) => delete d.outboxId),
      /body\.detail\.outboxId: is missing/,
    ],
    [
      "body.detail.outboxId",
      () => withDetail((d) => (d.outboxId = "x")),
      /body\.detail\.outboxId: is not a uuid/,
    ],
    ["body.detail.seq", () => withDetail((d) => (d.seq = 42)), /body\.detail\.seq: is a number/],
    [
      "body.detail.createdAt",
      () => withDetail((d) => (d.createdAt = "soon")),
      /body\.detail\.createdAt: is not a timestamp/,
    ],
    [
      "body.detail.aggregateId",
      () => withDetail((d) => delete d.aggregateId),
      /body\.detail\.aggregateId: is missing/,
    ],
    [
      "body.detail.eventType",
      () => withDetail((d) => (d.eventType = "other")),
      /body\.detail\.eventType: "other" differs from detail-type/,
    ],
    [
      "body.detail.headers",
      () => withDetail((d) => (d.headers = { n: 1 })),
      /body\.detail\.headers\.n: is a number/,
    ],
    ["body.detail.payload", () => withDetail((d) => delete d.payload), /body\.detail\.payload: is missing/],
  ])("a malformed %s is a ValidationError naming it", (_field, body, message) => {
    expect(() => parseInboxEvent(eventBridgeRecord(body()))).toThrow(message);
  });

  it("is not taken for an EventBridge event when the record is the relay's own message or no event at all", () => {
    const relayMessage = eventBridgeRecord(eventBridgeBody());
    relayMessage.messageAttributes = { outboxId: { dataType: "String", stringValue: "not-a-uuid" } };
    const noDetail = eventBridgeRecord(JSON.stringify({ "detail-type": "x", source: "y" }));

    // With the relay's outboxId attribute, the SQS path reads it (and finds its attribute malformed).
    expect(() => parseInboxEvent(relayMessage)).toThrow(/messageAttributes\.outboxId: is not a uuid/);
    expect(() => parseInboxEvent(noDetail)).toThrow(/messageAttributes\.outboxId: is missing/);
  });
});
