import {
  CreateStreamCommand,
  KinesisClient,
  PutRecordsCommand,
  ResourceNotFoundException,
} from "@aws-sdk/client-kinesis";
import {
  CreateTopicCommand,
  GetTopicAttributesCommand,
  InvalidParameterException,
  NotFoundException,
  PublishBatchCommand,
  PublishCommand,
  SNSClient,
  SubscribeCommand,
  ThrottledException,
  TooManyEntriesInBatchRequestException,
} from "@aws-sdk/client-sns";
import { CreateQueueCommand, ReceiveMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type FakeSqs, startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";

let fake: FakeSqs;
let sns: SNSClient;
let kinesis: KinesisClient;

beforeAll(async () => {
  fake = await startFakeSqs();
  sns = new SNSClient({ ...LOCAL_AWS, endpoint: fake.url, maxAttempts: 1 });
  // HTTP/1.1, as the relay's client (destinations/create.ts): the SDK's default HTTP/2 cannot reach plain http.
  kinesis = new KinesisClient({
    ...LOCAL_AWS,
    endpoint: fake.url,
    maxAttempts: 1,
    requestHandler: new NodeHttpHandler(),
  });
});
afterEach(() => {
  fake.resetFaults();
  fake.topics.clear();
  fake.streams.clear();
});
afterAll(async () => {
  sns.destroy();
  kinesis.destroy();
  await fake.close();
});

describe("the in-process endpoint speaks SNS's awsQuery to the real SNSClient", () => {
  it("publishes a FIFO batch with attributes, group and dedup ids, and answers per entry", async () => {
    const { TopicArn } = await sns.send(new CreateTopicCommand({ Name: "orders.fifo" }));
    expect(TopicArn).toBe("arn:aws:sns:us-east-1:000000000000:orders.fifo");
    const response = await sns.send(
      new PublishBatchCommand({
        TopicArn,
        PublishBatchRequestEntries: ["a", "b"].map((id, index) => ({
          Id: String(index),
          Message: `{"order":"${id}","note":"<&>"}`,
          MessageGroupId: `group-${id}`,
          MessageDeduplicationId: `dedup-${id}`,
          MessageAttributes: { outboxId: { DataType: "String", StringValue: `id-${id}` } },
        })),
      }),
    );
    expect(response.Successful?.map((entry) => entry.Id)).toEqual(["0", "1"]);
    expect(response.Successful?.[0]?.MessageId).toMatch(/^[0-9a-f-]{36}$/);
    expect(response.Failed ?? []).toEqual([]);
    expect(fake.topics.published()).toMatchObject([
      {
        topicArn: TopicArn,
        message: '{"order":"a","note":"<&>"}',
        groupId: "group-a",
        dedupId: "dedup-a",
        attributes: { outboxId: "id-a" },
      },
      { groupId: "group-b", dedupId: "dedup-b", attributes: { outboxId: "id-b" } },
    ]);
  });

  it("answers SNS's errors as the SDK's modelled exceptions, and applies the endpoint's faults", async () => {
    const { TopicArn } = await sns.send(new CreateTopicCommand({ Name: "plain" }));
    const entries = (count: number) =>
      Array.from({ length: count }, (_, i) => ({ Id: String(i), Message: "m" }));
    await expect(
      sns.send(new PublishBatchCommand({ TopicArn, PublishBatchRequestEntries: entries(11) })),
    ).rejects.toBeInstanceOf(TooManyEntriesInBatchRequestException);
    await expect(
      sns.send(
        new PublishBatchCommand({ TopicArn: `${TopicArn}-gone`, PublishBatchRequestEntries: entries(1) }),
      ),
    ).rejects.toBeInstanceOf(NotFoundException);
    const fifo = await sns.send(new CreateTopicCommand({ Name: "nogroup.fifo" }));
    await expect(
      sns.send(new PublishBatchCommand({ TopicArn: fifo.TopicArn, PublishBatchRequestEntries: entries(1) })),
    ).rejects.toBeInstanceOf(InvalidParameterException);
    fake.setFaults({ throttle: 1 });
    await expect(
      sns.send(new PublishBatchCommand({ TopicArn, PublishBatchRequestEntries: entries(1) })),
    ).rejects.toBeInstanceOf(ThrottledException);
    fake.resetFaults();
    fake.setFaults({ latencyMs: 60 });
    const started = performance.now();
    await sns.send(new PublishBatchCommand({ TopicArn, PublishBatchRequestEntries: entries(1) }));
    expect(performance.now() - started).toBeGreaterThanOrEqual(55);
    expect(fake.topics.published()).toHaveLength(1);
  });
});

describe("the in-process SNS delivers to SQS subscriptions as SNS does", () => {
  it("deduplicates a FIFO topic by content when enabled, within the window only, and fails an entry without a dedup id", async () => {
    const sqs = new SQSClient({ ...LOCAL_AWS, endpoint: fake.url });
    const { TopicArn } = await sns.send(
      new CreateTopicCommand({
        Name: "content.fifo",
        Attributes: { FifoTopic: "true", ContentBasedDeduplication: "true" },
      }),
    );
    const plainTopic = await sns.send(
      new CreateTopicCommand({ Name: "explicit.fifo", Attributes: { FifoTopic: "true" } }),
    );
    const { QueueUrl } = await sqs.send(
      new CreateQueueCommand({ QueueName: "from-topic.fifo", Attributes: { FifoQueue: "true" } }),
    );
    for (const topic of [TopicArn, plainTopic.TopicArn]) {
      await sns.send(
        new SubscribeCommand({
          TopicArn: topic,
          Protocol: "sqs",
          Endpoint: "arn:aws:sqs:us-east-1:000000000000:from-topic.fifo",
          Attributes: { RawMessageDelivery: "true" },
        }),
      );
    }
    const publish = (message: string) =>
      sns.send(new PublishCommand({ TopicArn, Message: message, MessageGroupId: "g" }));
    const first = await publish("same");
    const again = await publish("same");
    // The topic's deduplication id is the body's SHA-256, so the queue (no content-based dedup of its own) takes it.
    expect(again.MessageId).toBe(first.MessageId);
    expect(first.SequenceNumber).toMatch(/^\d{20}$/);
    fake.dedupWindowMs = 0;
    await publish("same");
    fake.dedupWindowMs = 5 * 60_000;
    const batch = await sns.send(
      new PublishBatchCommand({
        TopicArn: plainTopic.TopicArn,
        PublishBatchRequestEntries: [
          { Id: "ok", Message: "explicit", MessageGroupId: "g", MessageDeduplicationId: "d" },
          { Id: "noDedup", Message: "no id", MessageGroupId: "g" },
        ],
      }),
    );
    expect(batch.Successful?.map((entry) => entry.Id)).toEqual(["ok"]);
    expect(batch.Failed).toEqual([
      expect.objectContaining({ Id: "noDedup", Code: "InvalidParameter", SenderFault: true }),
    ]);

    const bodies: string[] = [];
    for (let poll = 0; poll < 6 && bodies.length < 3; poll++) {
      const { Messages = [] } = await sqs.send(
        new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 0 }),
      );
      bodies.push(...Messages.map((message) => message.Body as string));
    }
    expect(bodies).toEqual(["same", "same", "explicit"]);
    const { Attributes } = await sns.send(new GetTopicAttributesCommand({ TopicArn }));
    expect(Attributes).toMatchObject({
      FifoTopic: "true",
      ContentBasedDeduplication: "true",
      SubscriptionsConfirmed: "1",
    });
    await expect(
      sns.send(
        new SubscribeCommand({
          TopicArn: (await sns.send(new CreateTopicCommand({ Name: "std" }))).TopicArn,
          Protocol: "sqs",
          Endpoint: "arn:aws:sqs:us-east-1:000000000000:from-topic.fifo",
        }),
      ),
    ).rejects.toBeInstanceOf(InvalidParameterException);
    sqs.destroy();
  });
});

describe("the in-process endpoint speaks Kinesis's JSON 1.1 to the real KinesisClient", () => {
  it("puts records by stream name or ARN, with growing sequence numbers, positionally", async () => {
    await kinesis.send(new CreateStreamCommand({ StreamName: "audit", ShardCount: 1 }));
    const records = ["x", "y", "z"].map((key) => ({
      PartitionKey: key,
      Data: Buffer.from(`{"k":"${key}"}`),
    }));
    const byName = await kinesis.send(new PutRecordsCommand({ StreamName: "audit", Records: records }));
    const byArn = await kinesis.send(
      new PutRecordsCommand({
        StreamARN: "arn:aws:kinesis:us-east-1:000000000000:stream/audit",
        Records: records.slice(0, 1),
      }),
    );
    expect(byName.FailedRecordCount).toBe(0);
    const sequences = [...(byName.Records ?? []), ...(byArn.Records ?? [])].map(
      (r) => r.SequenceNumber ?? "",
    );
    expect(sequences).toHaveLength(4);
    expect([...sequences].sort()).toEqual(sequences);
    expect(new Set(sequences).size).toBe(4);
    expect(fake.streams.records().map((r) => [r.partitionKey, r.data.toString()])).toEqual([
      ["x", '{"k":"x"}'],
      ["y", '{"k":"y"}'],
      ["z", '{"k":"z"}'],
      ["x", '{"k":"x"}'],
    ]);
    await expect(
      kinesis.send(new PutRecordsCommand({ StreamName: "missing", Records: records })),
    ).rejects.toBeInstanceOf(ResourceNotFoundException);
  });

  it("numbers records so that a later one's sequence number is the larger number, past 9 too", async () => {
    await kinesis.send(new CreateStreamCommand({ StreamName: "numbered", ShardCount: 1 }));
    const { Records = [] } = await kinesis.send(
      new PutRecordsCommand({
        StreamName: "numbered",
        Records: Array.from({ length: 12 }, (_, i) => ({ PartitionKey: "k", Data: Buffer.from(String(i)) })),
      }),
    );
    // Lambda's event source and kinesisEventSource.ts resume at the lowest failed sequence number, compared as
    // numbers: "4...41" > "4...410" made the 10th record look older than the 1st.
    const sequences = Records.map((record) => BigInt(record.SequenceNumber ?? "0"));
    expect(sequences.every((sequence, i) => i === 0 || sequence > (sequences[i - 1] as bigint))).toBe(true);
    expect(Records.every((record) => record.SequenceNumber?.length === 56)).toBe(true);
  });
});
