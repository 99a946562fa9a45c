import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { CreateStreamCommand, KinesisClient } from "@aws-sdk/client-kinesis";
import { CreateTopicCommand, SNSClient, SubscribeCommand } from "@aws-sdk/client-sns";
import { CreateQueueCommand, GetQueueAttributesCommand } from "@aws-sdk/client-sqs";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { afterAll, describe, expect, inject, it } from "vitest";
import { kinesisDestination } from "../../functions/shared/destinations/kinesis/kinesis.ts";
import { snsDestination } from "../../functions/shared/destinations/sns/sns.ts";
import { sqsStandardDestination } from "../../functions/shared/destinations/sqs/sqsFifo.ts";
import { ConfigError } from "../../functions/shared/outbox/errors.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { aLoadedRow } from "../support/eventBridge.ts";
import { createFifoQueue, receiveAll, sqsClient } from "../support/sqs.ts";

const endpoint = inject("awsEndpoint");
const sqs = sqsClient();
const sns = new SNSClient({ ...LOCAL_AWS, endpoint });
const http1 = () => new NodeHttpHandler({});
const kinesis = new KinesisClient({ ...LOCAL_AWS, endpoint, requestHandler: http1() });
afterAll(() => {
  for (const client of [sqs, sns, kinesis]) client.destroy();
});
const suffix = () => randomBytes(4).toString("hex");

function prepareAll<M>(
  destination: { prepare(row: ReturnType<typeof aLoadedRow>): unknown },
  rows: ReturnType<typeof aLoadedRow>[],
) {
  return rows.map((row) => {
    const prepared = destination.prepare(row);
    if (typeof prepared === "string") throw new Error(prepared);
    return prepared as { row: typeof row; message: M; size: number };
  });
}

describe(`SQS standard queue (${inject("awsSource")})`, () => {
  it("sends the FIFO path's body and attributes without group or deduplication ids", async () => {
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: `std-${suffix()}` }));
    const destination = sqsStandardDestination(sqs, { queueUrl: QueueUrl as string });
    const row = aLoadedRow({ headers: { tenant: "t-1" } });
    const [prepared] = prepareAll(destination, [row]);
    expect(prepared?.message).not.toHaveProperty("MessageGroupId");
    expect(prepared?.message).not.toHaveProperty("MessageDeduplicationId");

    expect(await destination.send(prepareAll(destination, [row]))).toEqual([{ row, status: "published" }]);
    const [message] = await receiveAll(sqs, QueueUrl as string, 1);
    expect(message?.MessageAttributes?.outboxId?.StringValue).toBe(row.id);
    expect(message?.MessageAttributes?.tenant?.StringValue).toBe("t-1");
    expect(JSON.parse(message?.Body ?? "")).toEqual({ n: Number(row.seq), total: 4200 });
    await expect(destination.check?.(5_000)).resolves.toEqual({ verified: true });
  });

  it("refuses, at the check, a FIFO queue named by a standard route", async () => {
    const queueUrl = await createFifoQueue(sqs, "not-standard");
    const destination = sqsStandardDestination(sqs, { queueUrl });
    await expect(destination.check?.(5_000)).rejects.toThrow(ConfigError);
    await expect(destination.check?.(5_000)).rejects.toThrow(/is a FIFO queue but its route's kind is sqs/);
  });
});

describe(`SNS topics (${inject("awsSource")})`, () => {
  it("a FIFO topic gets group id = aggregate_id, dedup id = outbox id and the SQS path's attributes", async () => {
    const { TopicArn } = await sns.send(
      new CreateTopicCommand({ Name: `conf-${suffix()}.fifo`, Attributes: { FifoTopic: "true" } }),
    );
    const queueUrl = await createFifoQueue(sqs, "topic-sub");
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["QueueArn"] }),
    );
    await sns.send(
      new SubscribeCommand({
        TopicArn,
        Protocol: "sqs",
        Endpoint: Attributes?.QueueArn,
        Attributes: { RawMessageDelivery: "true" },
      }),
    );
    const destination = snsDestination(sns, { topicArn: TopicArn as string, fifo: true });
    const rows = [
      aLoadedRow({ aggregate_id: "g-1" }),
      aLoadedRow({ aggregate_id: "g-2", headers: { a: "b" } }),
    ];

    const results = await destination.send(prepareAll(destination, rows));

    expect(results.map((result) => result.status)).toEqual(["published", "published"]);
    const messages = await receiveAll(sqs, queueUrl, 2);
    const second = messages.find((message) => message.Attributes?.MessageGroupId === "g-2");
    expect(second?.Attributes?.MessageDeduplicationId).toBe(rows[1]?.id);
    expect(second?.MessageAttributes?.seq?.StringValue).toBe(rows[1]?.seq);
    expect(second?.MessageAttributes?.a?.StringValue).toBe("b");
    expect(second?.MessageAttributes?.eventType?.StringValue).toBe("order.created");
  });

  it("an entry SNS refuses as the sender's fault is rejected, permanently; a missing topic is unsent", async () => {
    const { TopicArn } = await sns.send(new CreateTopicCommand({ Name: `standard-${suffix()}` }));
    // A FIFO destination pointed at a standard topic: SNS refuses each entry's deduplication id (InvalidParameter).
    const wrong = snsDestination(sns, { topicArn: TopicArn as string, fifo: true });
    const [refused] = await wrong.send(prepareAll(wrong, [aLoadedRow()]));
    expect(refused).toMatchObject({ status: "rejected", permanent: true });
    expect(refused?.status === "rejected" && refused.error).toMatch(/InvalidParameter/);

    const standard = snsDestination(sns, { topicArn: TopicArn as string, fifo: false });
    const [published] = await standard.send(prepareAll(standard, [aLoadedRow()]));
    expect(published?.status).toBe("published");

    const missing = snsDestination(sns, {
      topicArn: "arn:aws:sns:us-east-1:123456789012:does-not-exist",
      fifo: false,
    });
    const [unsent] = await missing.send(prepareAll(missing, [aLoadedRow()]));
    expect(unsent?.status).toBe("unsent");
  });

  it("refuses at prepare a message over the topic's 256 KiB", () => {
    const destination = snsDestination(sns, {
      topicArn: "arn:aws:sns:us-east-1:123456789012:t",
      fifo: false,
    });
    const big = aLoadedRow({ payload: JSON.stringify({ blob: "x".repeat(262_144) }) });
    expect(destination.prepare(big)).toMatch(/over the SNS topic's limit of 262144/);
  });
});

describe(`Kinesis data stream (${inject("awsSource")})`, () => {
  it("puts records with partition key = aggregate_id and the envelope as data; a missing stream is unsent", async () => {
    const name = `conf-${suffix()}`;
    await kinesis.send(new CreateStreamCommand({ StreamName: name, ShardCount: 1 }));
    const destination = kinesisDestination(kinesis, { stream: { streamName: name } });
    const row = aLoadedRow({ headers: { traceparent: "t" } });
    const [prepared] = prepareAll<{ PartitionKey: string; Data: Uint8Array }>(destination, [row]);
    expect(prepared?.message.PartitionKey).toBe(row.aggregate_id);
    expect(JSON.parse(Buffer.from(prepared?.message.Data as Uint8Array).toString())).toEqual({
      outboxId: row.id,
      aggregateType: "order",
      aggregateId: row.aggregate_id,
      eventType: "order.created",
      seq: row.seq,
      createdAt: "2026-12-01T10:00:00.000Z",
      headers: { traceparent: "t" },
      payload: { n: Number(row.seq), total: 4200 },
    });
    expect(await destination.send(prepareAll(destination, [row]))).toEqual([{ row, status: "published" }]);

    const missing = kinesisDestination(kinesis, { stream: { streamName: `missing-${suffix()}` } });
    expect((await missing.send(prepareAll(missing, [aLoadedRow()])))[0]?.status).toBe("unsent");
  });

  it("reads each record's result: throughput exceeded and internal failures are unsent, the rest published", async () => {
    // Kinesis's own wire answer for a partial failure (PutRecords, JSON 1.1), from a local endpoint: moto never
    // fails a record, and these two codes are the only per-record failures Kinesis documents.
    const server = createServer((request, response) => {
      request.resume();
      request.on("end", () => {
        response.setHeader("content-type", "application/x-amz-json-1.1");
        response.end(
          JSON.stringify({
            FailedRecordCount: 2,
            Records: [
              {
                ErrorCode: "ProvisionedThroughputExceededException",
                ErrorMessage: "Rate exceeded for shard",
              },
              { SequenceNumber: "4960", ShardId: "shardId-000000000000" },
              { ErrorCode: "InternalFailure", ErrorMessage: "Internal Service Failure" },
            ],
          }),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const client = new KinesisClient({
      ...LOCAL_AWS,
      endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      requestHandler: http1(),
      maxAttempts: 1,
    });
    try {
      const destination = kinesisDestination(client, { stream: { streamName: "s" } });
      const rows = [aLoadedRow(), aLoadedRow(), aLoadedRow()];
      const results = await destination.send(prepareAll(destination, rows));
      expect(results.map((result) => result.status)).toEqual(["unsent", "published", "unsent"]);
      expect(results[0]?.status === "unsent" && results[0].error).toMatch(/ProvisionedThroughputExceeded/);
    } finally {
      client.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("refuses at prepare a record over 1 MiB", () => {
    const destination = kinesisDestination(kinesis, { stream: { streamName: "s" } });
    const big = aLoadedRow({ payload: JSON.stringify({ blob: "x".repeat(1_048_576) }) });
    expect(destination.prepare(big)).toMatch(/over Kinesis's limit of 1048576/);
  });
});
