import { randomBytes } from "node:crypto";
import { CreateTopicCommand, SNSClient, SubscribeCommand } from "@aws-sdk/client-sns";
import { GetQueueAttributesCommand, type Message, SendMessageCommand } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { pollOnce } from "../../cli/dev/aws/sqsEventSource.ts";
import {
  createInboxHandler,
  type InboxEvent,
  type InboxRecordHandler,
} from "../../functions/shared/consumer/index.ts";
import { snsDestination } from "../../functions/shared/destinations/sns/sns.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { CONSUMER_SCHEMA, createConsumerTables, effects, inboxIds, recorder } from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { drainUntilEmpty, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, sqsClient } from "../support/sqs.ts";

const db = useTestDatabase();
const endpoint = inject("awsEndpoint");
const sqs = sqsClient();
const sns = new SNSClient({ ...LOCAL_AWS, endpoint });
afterAll(() => {
  sqs.destroy();
  sns.destroy();
});

/** Applies an event through the record's transaction, and keeps it. */
const keeping =
  (seen: InboxEvent[]): InboxRecordHandler =>
  async (event, { client }) => {
    seen.push(event);
    await client.query(
      `insert into ${CONSUMER_SCHEMA}.effects (outbox_id, aggregate_id, event_type) values ($1, $2, $3)`,
      [event.id, event.aggregateId, event.eventType],
    );
  };

async function consume(queueUrl: string, handler: ReturnType<typeof createInboxHandler>, count: number) {
  const received: Message[] = [];
  for (let empty = 0; received.length < count && empty < 10; ) {
    const result = await pollOnce(sqs, queueUrl, handler, { waitSeconds: 1, retryFailedAfterSeconds: 0 });
    received.push(...result.messages);
    empty = result.received === 0 ? empty + 1 : 0;
  }
  return received;
}

/** seq of each aggregate's events in the order they were applied. */
function seqsByAggregate(seen: InboxEvent[]) {
  const by = new Map<string, bigint[]>();
  for (const event of seen) by.set(event.aggregateId, [...(by.get(event.aggregateId) ?? []), event.seq]);
  return by;
}

describe(`consuming the relay's events through an SNS FIFO topic, raw and enveloped (${inject("awsSource")})`, () => {
  let topicArn: string;
  let rawQueue: string;
  let envelopeQueue: string;

  beforeAll(async () => {
    const { TopicArn } = await sns.send(
      new CreateTopicCommand({
        Name: `inbox-${randomBytes(4).toString("hex")}.fifo`,
        Attributes: { FifoTopic: "true" },
      }),
    );
    topicArn = TopicArn as string;
    [rawQueue, envelopeQueue] = [
      await createFifoQueue(sqs, "sub-raw"),
      await createFifoQueue(sqs, "sub-env"),
    ];
    for (const [queueUrl, raw] of [
      [rawQueue, "true"],
      [envelopeQueue, "false"],
    ] as const) {
      const { Attributes } = await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["QueueArn"] }),
      );
      await sns.send(
        new SubscribeCommand({
          TopicArn: topicArn,
          Protocol: "sqs",
          Endpoint: Attributes?.QueueArn,
          Attributes: { RawMessageDelivery: raw },
        }),
      );
    }
  });
  beforeEach(async () => {
    await db.pool.query("delete from outbox_events");
    await db.pool.query(`drop schema if exists ${CONSUMER_SCHEMA} cascade`);
    await createConsumerTables(db.pool);
  });

  it("applies every event once from both subscriptions, per aggregate in seq order, the envelope read as raw", async () => {
    const written = await enqueueCommitted(
      db.pool,
      Array.from({ length: 12 }, (_, i) =>
        anEvent({ aggregateId: `sns-${i % 4}`, payload: { n: i }, headers: { tenant: "t-1" } }),
      ),
    );
    await drainUntilEmpty(
      db.pool,
      snsDestination(sns, { topicArn, fifo: true }),
      testRelayOptions("unused-with-a-topic", { publishTimeoutMs: 30_000 }),
    );
    const raw: InboxEvent[] = [];
    const enveloped: InboxEvent[] = [];
    const rawHandler = createInboxHandler(keeping(raw), {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      consumer: "raw",
    });
    const envelopeLog = recorder();
    const envelopeHandler = createInboxHandler(keeping(enveloped), {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      consumer: "envelope",
      onOutcome: envelopeLog.onOutcome,
    });

    await consume(rawQueue, rawHandler, 12);
    const received = await consume(envelopeQueue, envelopeHandler, 12);

    const ids = written.map((row) => row.id).sort();
    expect(raw.map((event) => event.id).sort()).toEqual(ids);
    expect(enveloped.map((event) => event.id).sort()).toEqual(ids);
    // The body SNS wrapped really was the JSON notification, not the raw message.
    expect(JSON.parse(received[0]?.Body ?? "{}")).toMatchObject({ Type: "Notification", TopicArn: topicArn });
    for (const seen of [raw, enveloped]) {
      for (const [aggregate, seqs] of seqsByAggregate(seen)) {
        expect(seqs, aggregate).toEqual([...seqs].sort((a, b) => (a < b ? -1 : 1)));
      }
    }
    const strip = ({ origin, delivery, trace, sequenceNumber, ...event }: InboxEvent) => event;
    const byId = new Map(raw.map((event) => [event.id, strip(event)]));
    for (const event of enveloped) expect(strip(event)).toEqual(byId.get(event.id));
    expect(enveloped[0]).toMatchObject({ headers: { tenant: "t-1" }, payload: { n: expect.any(Number) } });
    expect(enveloped[0]?.sequenceNumber).toEqual(expect.any(BigInt));

    // The same notification delivered again (SNS is at least once past its 5-minute window): skipped.
    const again = received[0] as Message;
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: envelopeQueue,
        MessageBody: again.Body,
        MessageGroupId: again.Attributes?.MessageGroupId,
        MessageDeduplicationId: `${again.MessageId}-again`,
      }),
    );
    await consume(envelopeQueue, envelopeHandler, 1);
    expect(envelopeLog.outcomes.filter((outcome) => outcome.status === "duplicate")).toHaveLength(1);
    expect(enveloped).toHaveLength(12);
  });

  it("refuses a malformed envelope naming the field, applies nothing, and lets the group's later records wait", async () => {
    const notification = (fields: Record<string, unknown>) =>
      JSON.stringify({
        Type: "Notification",
        MessageId: randomBytes(8).toString("hex"),
        TopicArn: topicArn,
        Message: JSON.stringify({ n: 1 }),
        Timestamp: new Date().toISOString(),
        MessageAttributes: {
          outboxId: { Type: "String", Value: "0b8f7a2e-3c1d-4e5f-9a6b-7c8d9e0f1a2b" },
          eventType: { Type: "String", Value: "order.placed" },
          aggregateType: { Type: "String", Value: "order" },
          aggregateId: { Type: "String", Value: "bad-1" },
          createdAt: { Type: "String", Value: "2026-12-01T10:00:00.000Z" },
          seq: { Type: "String", Value: "7" },
        },
        ...fields,
      });
    const send = (body: string, group: string) =>
      sqs.send(
        new SendMessageCommand({
          QueueUrl: envelopeQueue,
          MessageBody: body,
          MessageGroupId: group,
          MessageDeduplicationId: randomBytes(8).toString("hex"),
        }),
      );
    // A Message that is not JSON, then a well-formed event of the same group; and, in another group, an
    // attribute without its Value.
    await send(notification({ Message: "{not json" }), "bad-1");
    await send(notification({}), "bad-1");
    await send(notification({ MessageAttributes: { seq: { Type: "String" } } }), "bad-2");
    const log = recorder();
    const handler = createInboxHandler(keeping([]), {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      onOutcome: log.onOutcome,
      logger: log.logger,
    });

    const result = await pollOnce(sqs, envelopeQueue, handler, {
      waitSeconds: 1,
      retryFailedAfterSeconds: 0,
    });

    expect(result.received).toBe(3);
    expect(result.failed).toBe(3);
    expect(log.outcomes.map((outcome) => outcome.status)).toEqual(
      expect.arrayContaining(["failed", "skipped", "failed"]),
    );
    const errors = log.outcomes.flatMap((outcome) =>
      outcome.status === "failed" ? [String((outcome.error as Error).message)] : [],
    );
    expect(errors.sort()).toEqual([
      expect.stringMatching(/^body\.Message: is not JSON/),
      expect.stringMatching(/^body\.MessageAttributes\.seq\.Value: is missing/),
    ]);
    expect(await effects(db.pool)).toEqual([]);
    expect(await inboxIds(db.pool)).toEqual([]);
  });
});
