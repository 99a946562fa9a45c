import { randomBytes } from "node:crypto";
import {
  CreateStreamCommand,
  DescribeStreamCommand,
  GetRecordsCommand,
  GetShardIteratorCommand,
  KinesisClient,
} from "@aws-sdk/client-kinesis";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import {
  createInboxHandler,
  type InboxEvent,
  type InboxRecordHandler,
  type KinesisEvent,
  type KinesisRecord,
} from "../../functions/shared/consumer/index.ts";
import { kinesisDestination } from "../../functions/shared/destinations/kinesis/kinesis.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { CONSUMER_SCHEMA, createConsumerTables, effects, inboxIds, recorder } from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { drainUntilEmpty, testRelayOptions } from "../support/relay.ts";

const db = useTestDatabase();
const kinesis = new KinesisClient({
  ...LOCAL_AWS,
  endpoint: inject("awsEndpoint"),
  requestHandler: new NodeHttpHandler({}),
});
afterAll(() => kinesis.destroy());

/** The shard's records as Lambda's Kinesis event source hands them over (data base64, one shard per batch). */
async function shardEvent(streamName: string, streamArn: string): Promise<KinesisEvent> {
  const { StreamDescription } = await kinesis.send(new DescribeStreamCommand({ StreamName: streamName }));
  const { ShardIterator } = await kinesis.send(
    new GetShardIteratorCommand({
      StreamName: streamName,
      ShardId: StreamDescription?.Shards?.[0]?.ShardId,
      ShardIteratorType: "TRIM_HORIZON",
    }),
  );
  const { Records = [] } = await kinesis.send(new GetRecordsCommand({ ShardIterator, Limit: 1000 }));
  return {
    Records: Records.map(
      (record): KinesisRecord => ({
        kinesis: {
          partitionKey: record.PartitionKey as string,
          sequenceNumber: record.SequenceNumber as string,
          data: Buffer.from(record.Data as Uint8Array).toString("base64"),
        },
        eventSource: "aws:kinesis",
        eventSourceARN: streamArn,
      }),
    ),
  };
}

/** What Lambda sends after a partial failure: the shard again from the lowest reported sequence number. */
function fromCheckpoint(event: KinesisEvent, failures: { itemIdentifier: string }[]): KinesisEvent {
  const lowest = failures
    .map((failure) => BigInt(failure.itemIdentifier))
    .sort((a, b) => (a < b ? -1 : 1))[0];
  return {
    Records: event.Records.filter((record) => BigInt(record.kinesis.sequenceNumber) >= (lowest ?? 0n)),
  };
}

describe(`consuming the relay's events from a Kinesis stream (${inject("awsSource")})`, () => {
  let streamName: string;
  let streamArn: string;
  let event: KinesisEvent;
  let written: { id: string }[];

  beforeAll(async () => {
    streamName = `inbox-${randomBytes(4).toString("hex")}`;
    await kinesis.send(new CreateStreamCommand({ StreamName: streamName, ShardCount: 1 }));
    const { StreamDescription } = await kinesis.send(new DescribeStreamCommand({ StreamName: streamName }));
    streamArn = StreamDescription?.StreamARN as string;
    await db.pool.query("delete from outbox_events");
    // Three aggregates interleaved: k-0 k-1 k-2 k-0 k-1 k-2 ...
    written = await enqueueCommitted(
      db.pool,
      Array.from({ length: 9 }, (_, i) =>
        anEvent({ aggregateId: `k-${i % 3}`, payload: { n: i }, headers: { tenant: "t-1" } }),
      ),
    );
    await drainUntilEmpty(
      db.pool,
      kinesisDestination(kinesis, { stream: { streamName } }),
      testRelayOptions("unused-with-a-stream"),
    );
    event = await shardEvent(streamName, streamArn);
  });
  beforeEach(async () => {
    await db.pool.query(`drop schema if exists ${CONSUMER_SCHEMA} cascade`);
    await createConsumerTables(db.pool);
  });

  const writeEffect: InboxRecordHandler = async (e, { client }) => {
    await client.query(
      `insert into ${CONSUMER_SCHEMA}.effects (outbox_id, aggregate_id, event_type) values ($1, $2, $3)`,
      [e.id, e.aggregateId, e.eventType],
    );
  };

  it("applies every record once, as the event the SQS path gives; a second delivery is skipped", async () => {
    const seen: InboxEvent[] = [];
    const log = recorder();
    const handler = createInboxHandler(
      async (e, context) => {
        seen.push(e);
        await writeEffect(e, context);
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA, onOutcome: log.onOutcome },
    );

    expect(event.Records).toHaveLength(9);
    expect(await handler(event)).toEqual({ batchItemFailures: [] });
    expect(await handler(event)).toEqual({ batchItemFailures: [] });

    expect((await effects(db.pool)).sort()).toEqual(written.map((row) => row.id).sort());
    expect(log.outcomes.filter((outcome) => outcome.status === "duplicate")).toHaveLength(9);
    const first = seen.find((e) => e.id === written[0]?.id);
    expect(first).toMatchObject({
      aggregateType: "order",
      aggregateId: "k-0",
      payload: { n: 0 },
      headers: { tenant: "t-1" },
      origin: streamArn,
      sequenceNumber: BigInt(event.Records[0]?.kinesis.sequenceNumber ?? -1),
      delivery: { messageId: event.Records[0]?.kinesis.sequenceNumber, receiveCount: 0 },
    });
  });

  it("a failing record in the middle: reported by sequence number with its key's later records, which are not applied; other keys go on", async () => {
    // The fifth record (k-1's second event) fails once.
    const failing = written[4]?.id;
    let failures = 1;
    const handler = createInboxHandler(
      async (e, context) => {
        if (e.id === failing && failures-- > 0) throw new Error("downstream refused");
        await writeEffect(e, context);
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA },
    );

    const first = await handler(event);

    const sequenceOf = (index: number) => event.Records[index]?.kinesis.sequenceNumber as string;
    // k-1's second and third events (records 4 and 7), by sequence number, in delivery order.
    expect(first.batchItemFailures).toEqual([
      { itemIdentifier: sequenceOf(4) },
      { itemIdentifier: sequenceOf(7) },
    ]);
    const applied = new Set(await effects(db.pool));
    expect([...applied].sort()).toEqual(
      written
        .filter((_, index) => index !== 4 && index !== 7)
        .map((row) => row.id)
        .sort(),
    );

    // Lambda resends the shard from the checkpoint: what was applied is skipped, the rest applied in key order.
    const second = await handler(fromCheckpoint(event, first.batchItemFailures));
    expect(second).toEqual({ batchItemFailures: [] });
    const { rows } = await db.pool.query<{ outbox_id: string }>(
      `select outbox_id from ${CONSUMER_SCHEMA}.effects where aggregate_id = 'k-1' order by applied_at`,
    );
    expect(rows.map((row) => row.outbox_id)).toEqual([written[1]?.id, written[4]?.id, written[7]?.id]);
    expect((await inboxIds(db.pool)).length).toBe(9);
  });

  it("refuses a record whose data is not the relay's envelope, naming the field, and applies nothing of it", async () => {
    const log = recorder();
    const handler = createInboxHandler(writeEffect, {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      onOutcome: log.onOutcome,
      logger: log.logger,
    });
    const record = (data: string, sequenceNumber: string): KinesisRecord => ({
      kinesis: { partitionKey: "bad-1", sequenceNumber, data: Buffer.from(data).toString("base64") },
      eventSource: "aws:kinesis",
      eventSourceARN: streamArn,
    });
    const envelope = JSON.stringify({
      outboxId: "0b8f7a2e-3c1d-4e5f-9a6b-7c8d9e0f1a2b",
      aggregateType: "order",
      aggregateId: "bad-1",
      eventType: "order.placed",
      seq: 7,
      createdAt: "2026-12-01T10:00:00.000Z",
      headers: {},
      payload: {},
    });

    const response = await handler({ Records: [record("{not json", "100"), record(envelope, "101")] });

    expect(response.batchItemFailures).toEqual([{ itemIdentifier: "100" }, { itemIdentifier: "101" }]);
    const failed = log.outcomes.find((outcome) => outcome.status === "failed");
    expect(String((failed as { error: Error }).error.message)).toMatch(/^kinesis\.data: is not JSON/);
    // Alone, the second is refused for its own fault: seq must be the relay's string.
    await handler({ Records: [record(envelope, "101")] });
    expect(log.outcomes.at(-1)).toMatchObject({
      status: "failed",
      error: expect.objectContaining({ message: expect.stringMatching(/^kinesis\.data\.seq: is a number/) }),
    });
    expect(await effects(db.pool)).toEqual([]);
    expect(await inboxIds(db.pool)).toEqual([]);
  });
});
