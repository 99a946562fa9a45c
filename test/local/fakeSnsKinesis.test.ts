import {
  CreateStreamCommand,
  KinesisClient,
  PutRecordsCommand,
  ResourceNotFoundException,
} from "@aws-sdk/client-kinesis";
import {
  CreateTopicCommand,
  InvalidParameterException,
  NotFoundException,
  PublishBatchCommand,
  SNSClient,
  ThrottledException,
  TooManyEntriesInBatchRequestException,
} from "@aws-sdk/client-sns";
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
});
