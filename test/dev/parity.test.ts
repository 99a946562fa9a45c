import { randomBytes } from "node:crypto";
import { PutEventsCommand } from "@aws-sdk/client-eventbridge";
import {
  CreateStreamCommand,
  DescribeStreamCommand,
  GetRecordsCommand,
  GetShardIteratorCommand,
  KinesisClient,
  PutRecordsCommand,
} from "@aws-sdk/client-kinesis";
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import { CreateTopicCommand, PublishBatchCommand, SNSClient, SubscribeCommand } from "@aws-sdk/client-sns";
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type FakeSqs, startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { createBusToQueue, eventBridgeClient } from "../support/eventBridge.ts";

/**
 * The in-process endpoint (`outbox dev`, cli/dev/aws) held to the harness's endpoint (moto; LocalStack where
 * Docker answers): each scenario runs, unchanged, against both through the real SDK clients, and what a client
 * can observe is compared, and compared with what AWS documents. Where the reference emulator departs from AWS,
 * the test says so and holds the in-process endpoint to AWS.
 *
 * Not compared: the 5-minute deduplication window's end (a test cannot wait it out against moto; the
 * in-process window's expiry is tested in test/local/fakeSqs.test.ts), ReceiveRequestAttemptId (modelled by
 * neither), throughput limits.
 */
interface Clients {
  name: string;
  sqs: SQSClient;
  sns: SNSClient;
  kinesis: KinesisClient;
  s3: S3Client;
  events: ReturnType<typeof eventBridgeClient>;
}

let local: FakeSqs;
const endpoints: Clients[] = [];

function clients(name: string, endpoint: string): Clients {
  const common = { ...LOCAL_AWS, endpoint };
  return {
    name,
    sqs: new SQSClient(common),
    sns: new SNSClient(common),
    // HTTP/1.1, as the relay's client: the SDK's default HTTP/2 for Kinesis cannot reach plain http.
    kinesis: new KinesisClient({ ...common, requestHandler: new NodeHttpHandler() }),
    s3: new S3Client({ ...common, forcePathStyle: true }),
    events: eventBridgeClient(endpoint),
  };
}

beforeAll(async () => {
  local = await startFakeSqs();
  endpoints.push(clients("reference", inject("awsEndpoint")), clients("in-process", local.url));
});
afterAll(async () => {
  for (const c of endpoints) for (const client of [c.sqs, c.sns, c.kinesis, c.s3, c.events]) client.destroy();
  await local.close();
});

/** Runs one scenario against the reference endpoint and the in-process one: [reference, in-process]. */
async function both<T>(scenario: (c: Clients) => Promise<T>): Promise<[T, T]> {
  const [reference, inProcess] = endpoints as [Clients, Clients];
  return [await scenario(reference), await scenario(inProcess)];
}

/** The same documented outcome from both endpoints; a failure names the endpoint. */
function expectBoth<T>(observed: [T, T], expected: T): void {
  for (const [i, outcome] of observed.entries()) expect(outcome, endpoints[i]?.name).toEqual(expected);
}

const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString("hex")}`;

async function queue(
  c: Clients,
  attributes: Record<string, string> = {},
): Promise<{ url: string; arn: string }> {
  const fifo = attributes.FifoQueue === "true";
  const { QueueUrl } = await c.sqs.send(
    new CreateQueueCommand({
      QueueName: `${unique("parity")}${fifo ? ".fifo" : ""}`,
      Attributes: attributes,
    }),
  );
  const url = QueueUrl as string;
  const { Attributes } = await c.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["QueueArn"] }),
  );
  return { url, arn: Attributes?.QueueArn as string };
}

async function receive(c: Clients, url: string, max = 10, waitSeconds = 0): Promise<Message[]> {
  const { Messages = [] } = await c.sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: url,
      MaxNumberOfMessages: max,
      WaitTimeSeconds: waitSeconds,
      MessageAttributeNames: ["All"],
      MessageSystemAttributeNames: ["All"],
    }),
  );
  return Messages;
}

/** Receives (long polls, deleting each) until `count` arrived or nothing comes for a whole poll. */
async function drain(c: Clients, url: string, count: number): Promise<Message[]> {
  const all: Message[] = [];
  while (all.length < count) {
    const batch = await receive(c, url, 10, 2);
    if (batch.length === 0) break;
    for (const message of batch) {
      all.push(message);
      await c.sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: message.ReceiptHandle }));
    }
  }
  return all;
}

const bodies = (messages: Message[]) => messages.map((message) => message.Body);

/** Messages grouped by MessageGroupId, each group's bodies in the order received. */
function byGroup(messages: Message[]): Record<string, string[]> {
  const groups: Record<string, string[]> = {};
  for (const message of messages) {
    const group = message.Attributes?.MessageGroupId ?? "";
    groups[group] = [...(groups[group] ?? []), message.Body as string];
  }
  return groups;
}

describe("SQS FIFO: the in-process endpoint behaves as the reference and as AWS documents", () => {
  it("keeps each group's order, and holds a group while one of its messages is in flight", async () => {
    const observed = await both(async (c) => {
      const { url } = await queue(c, { FifoQueue: "true", VisibilityTimeout: "30" });
      await c.sqs.send(
        new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: ["a1", "b1", "a2", "a3", "b2"].map((body) => ({
            Id: body,
            MessageBody: body,
            MessageGroupId: body.slice(0, 1),
            MessageDeduplicationId: body,
          })),
        }),
      );
      const first = await receive(c, url, 1);
      // a1 is in flight: nothing more of group a may be handed out, group b may.
      const whileInFlight = await receive(c, url, 10);
      const afterwards = whileInFlight.length > 0 ? [] : await receive(c, url, 10);
      for (const message of [...first, ...whileInFlight]) {
        await c.sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: message.ReceiptHandle }));
      }
      const released = await drain(c, url, 2);
      return {
        first: bodies(first),
        whileInFlight: bodies(whileInFlight),
        afterwards: bodies(afterwards),
        released: bodies(released),
      };
    });
    // "Messages that belong to the same message group are always processed one by one, in a strict order"; a
    // group's next message is not returned while one of it is in flight (SQS Developer Guide, "Using the
    // message group ID with Amazon SQS FIFO queues").
    expectBoth(observed, {
      first: ["a1"],
      whileInFlight: ["b1", "b2"],
      afterwards: [],
      released: ["a2", "a3"],
    });
  });

  it("redelivers a message whose visibility timeout ran out, and at once after ChangeMessageVisibility 0", async () => {
    const observed = await both(async (c) => {
      const { url } = await queue(c, { FifoQueue: "true", VisibilityTimeout: "1" });
      await c.sqs.send(
        new SendMessageCommand({
          QueueUrl: url,
          MessageBody: "m",
          MessageGroupId: "g",
          MessageDeduplicationId: "m",
        }),
      );
      const [first] = await receive(c, url, 1);
      // Long polls until the message is visible again: no sleep decides it.
      let again: Message[] = [];
      for (let poll = 0; poll < 5 && again.length === 0; poll++) again = await receive(c, url, 1, 1);
      await c.sqs.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: url,
          ReceiptHandle: again[0]?.ReceiptHandle,
          VisibilityTimeout: 0,
        }),
      );
      const third = await receive(c, url, 1);
      return [first, again[0], third[0]].map((message) => ({
        body: message?.Body,
        receiveCount: message?.Attributes?.ApproximateReceiveCount,
        sameHandle: message?.ReceiptHandle === first?.ReceiptHandle,
      }));
    });
    expectBoth(observed, [
      { body: "m", receiveCount: "1", sameHandle: true },
      // Each receive issues a new receipt handle (SQS Developer Guide, "Amazon SQS visibility timeout").
      { body: "m", receiveCount: "2", sameHandle: false },
      { body: "m", receiveCount: "3", sameHandle: false },
    ]);
  });

  it("deduplicates by MessageDeduplicationId, also after the first was deleted, and by content when enabled", async () => {
    const observed = await both(async (c) => {
      const explicit = await queue(c, { FifoQueue: "true" });
      const send = (url: string, body: string, dedupId?: string) =>
        c.sqs.send(
          new SendMessageCommand({
            QueueUrl: url,
            MessageBody: body,
            MessageGroupId: "g",
            ...(dedupId === undefined ? {} : { MessageDeduplicationId: dedupId }),
          }),
        );
      const one = await send(explicit.url, "first", "d-1");
      const two = await send(explicit.url, "second, same id", "d-1");
      const explicitReceived = await drain(c, explicit.url, 5);
      // Deleted, but its deduplication id is remembered for the window (SQS Developer Guide, "Exactly-once processing").
      await send(explicit.url, "third, same id after the delete", "d-1");
      const afterDelete = await receive(c, explicit.url, 10, 1);

      const content = await queue(c, { FifoQueue: "true", ContentBasedDeduplication: "true" });
      await send(content.url, "same body");
      await send(content.url, "same body");
      await send(content.url, "other body");
      const contentReceived = await drain(c, content.url, 5);
      return {
        accepted: [one.MessageId !== undefined, two.MessageId !== undefined],
        explicit: bodies(explicitReceived),
        afterDelete: bodies(afterDelete),
        content: bodies(contentReceived),
      };
    });
    const aws = {
      accepted: [true, true],
      explicit: ["first"],
      afterDelete: [],
      content: ["same body", "other body"],
    };
    const [reference, inProcess] = observed;
    expect(inProcess).toEqual(aws);
    // moto 5 forgets a deleted message's deduplication id and delivers the third send; AWS deduplicates it for
    // the whole interval, deleted or not (SQS Developer Guide, "Using the message deduplication ID": "...accepted
    // successfully but aren't delivered during the 5-minute deduplication interval").
    expect({ ...reference, afterDelete: [] }).toEqual(aws);
  });

  it("fails a FIFO batch whole for an entry without its group; batch-level problems fail the request", async () => {
    const observed = await both(async (c) => {
      const { url } = await queue(c, { FifoQueue: "true" });
      const requestError = async (
        entries: { Id: string; MessageBody: string; MessageGroupId?: string }[],
      ) => {
        const error = await c.sqs
          .send(
            new SendMessageBatchCommand({
              QueueUrl: url,
              Entries: entries.map((entry) => ({
                MessageGroupId: "g",
                ...entry,
                MessageDeduplicationId: entry.Id,
              })),
            }),
          )
          .then(() => undefined)
          .catch((caught: { name: string }) => caught.name);
        return error;
      };
      const noGroup = await requestError([
        { Id: "ok", MessageBody: "ok" },
        { Id: "nogroup", MessageBody: "no group", MessageGroupId: undefined },
      ]);
      return {
        noGroup,
        accepted: bodies(await receive(c, url, 10)),
        duplicateIds: await requestError([
          { Id: "x", MessageBody: "1" },
          { Id: "x", MessageBody: "2" },
        ]),
        tooMany: await requestError(
          Array.from({ length: 11 }, (_, i) => ({ Id: `e${i}`, MessageBody: "m" })),
        ),
        empty: await requestError([]),
      };
    });
    // AWS fails the whole batch, the valid entry included (LocalStack's AWS-validated
    // test_send_batch_missing_message_group_id_for_fifo_queue); the in-process endpoint answered it per entry
    // until this test.
    expectBoth(observed, {
      noGroup: "MissingParameter",
      accepted: [],
      duplicateIds: "BatchEntryIdsNotDistinct",
      tooMany: "TooManyEntriesInBatchRequest",
      empty: "EmptyBatchRequest",
    });
  });
});

describe("SQS standard", () => {
  it("delivers every message once deleted, with the system attributes a consumer reads", async () => {
    const observed = await both(async (c) => {
      const { url } = await queue(c);
      for (const body of ["x", "y", "z"])
        await c.sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: body }));
      const messages = await drain(c, url, 3);
      const rejected = await c.sqs
        .send(new SendMessageCommand({ QueueUrl: url, MessageBody: "d", MessageDeduplicationId: "d" }))
        .catch((caught: { name: string }) => caught.name);
      return {
        bodies: bodies(messages).sort(),
        attributes: Object.keys(messages[0]?.Attributes ?? {})
          .filter((name) =>
            [
              "SenderId",
              "SentTimestamp",
              "ApproximateReceiveCount",
              "ApproximateFirstReceiveTimestamp",
            ].includes(name),
          )
          .sort(),
        dedupIdOnStandard: rejected,
      };
    });
    const aws = {
      bodies: ["x", "y", "z"],
      attributes: [
        "ApproximateFirstReceiveTimestamp",
        "ApproximateReceiveCount",
        "SenderId",
        "SentTimestamp",
      ],
      // MessageDeduplicationId "applies only to FIFO" queues (SQS API Reference, "SendMessage"); AWS answers
      // InvalidParameterValue "...The request include parameter that is not valid for this queue type".
      dedupIdOnStandard: "InvalidParameterValue",
    };
    const [reference, inProcess] = observed;
    expect(inProcess).toEqual(aws);
    // moto 5 accepts the parameter on a standard queue.
    expect({ ...reference, dedupIdOnStandard: "InvalidParameterValue" }).toEqual(aws);
  });
});

describe("SNS to SQS subscriptions", () => {
  it("FIFO topic to FIFO queue, raw delivery: each group's order, one copy of a duplicate, attributes carried", async () => {
    const observed = await both(async (c) => {
      const { TopicArn } = await c.sns.send(
        new CreateTopicCommand({ Name: `${unique("parity")}.fifo`, Attributes: { FifoTopic: "true" } }),
      );
      const target = await queue(c, { FifoQueue: "true" });
      await c.sns.send(
        new SubscribeCommand({
          TopicArn,
          Protocol: "sqs",
          Endpoint: target.arn,
          Attributes: { RawMessageDelivery: "true" },
        }),
      );
      const published = await c.sns.send(
        new PublishBatchCommand({
          TopicArn,
          PublishBatchRequestEntries: ["a1", "b1", "a2", "a1-again", "b2", "a3"].map((body, i) => ({
            Id: String(i),
            Message: body,
            MessageGroupId: body.slice(0, 1),
            MessageDeduplicationId: body.replace("-again", ""),
            MessageAttributes: { outboxId: { DataType: "String", StringValue: `id-${body}` } },
          })),
        }),
      );
      const messages = await drain(c, target.url, 6);
      return {
        successful: published.Successful?.length,
        groups: byGroup(messages),
        attributes: messages.map((message) => message.MessageAttributes?.outboxId?.StringValue).sort(),
      };
    });
    // A FIFO topic drops a message whose deduplication id it saw within 5 minutes, and passes the group to the
    // FIFO queue (SNS Developer Guide, "Message deduplication for FIFO topics", "Message ordering").
    expectBoth(observed, {
      successful: 6,
      groups: { a: ["a1", "a2", "a3"], b: ["b1", "b2"] },
      attributes: ["id-a1", "id-a2", "id-a3", "id-b1", "id-b2"],
    });
  });

  it("standard topic to standard queue without raw delivery: the JSON notification", async () => {
    const observed = await both(async (c) => {
      const { TopicArn } = await c.sns.send(new CreateTopicCommand({ Name: unique("parity") }));
      const target = await queue(c);
      await c.sns.send(new SubscribeCommand({ TopicArn, Protocol: "sqs", Endpoint: target.arn }));
      await c.sns.send(
        new PublishBatchCommand({
          TopicArn,
          PublishBatchRequestEntries: [
            {
              Id: "1",
              Message: '{"order":1}',
              MessageAttributes: { outboxId: { DataType: "String", StringValue: "id-1" } },
            },
          ],
        }),
      );
      const [message] = await drain(c, target.url, 1);
      const notification = JSON.parse(message?.Body ?? "{}");
      return {
        type: notification.Type,
        topic: notification.TopicArn === TopicArn,
        message: notification.Message,
        attributes: notification.MessageAttributes,
        fields: [
          "MessageId",
          "Timestamp",
          "SignatureVersion",
          "Signature",
          "SigningCertURL",
          "UnsubscribeURL",
        ].filter((field) => typeof notification[field] === "string"),
        sqsAttributes: message?.MessageAttributes,
      };
    });
    // SNS Developer Guide, "Amazon SNS message and JSON formats": the notification carries the message and its
    // attributes as {Type, Value}; the SQS message itself has none (those come only with raw delivery).
    expectBoth(observed, {
      type: "Notification",
      topic: true,
      message: '{"order":1}',
      attributes: { outboxId: { Type: "String", Value: "id-1" } },
      fields: ["MessageId", "Timestamp", "SignatureVersion", "Signature", "SigningCertURL", "UnsubscribeURL"],
      sqsAttributes: undefined,
    });
  });
});

describe("EventBridge rule to an SQS target", () => {
  it("delivers the matched event in EventBridge's envelope, and not the unmatched one", async () => {
    const observed = await both(async (c) => {
      const { busName, queueUrl: QueueUrl } = await createBusToQueue(
        c.events,
        c.sqs,
        "orders.service",
        "parity",
      );
      const put = await c.events.send(
        new PutEventsCommand({
          Entries: [
            {
              EventBusName: busName,
              Source: "orders.service",
              DetailType: "order.created",
              Detail: '{"orderId":"o-1"}',
              Resources: ["arn:aws:example:::order/o-1"],
            },
            { EventBusName: busName, Source: "other.service", DetailType: "x", Detail: "{}" },
          ],
        }),
      );
      const messages = await drain(c, QueueUrl, 2);
      const event = JSON.parse(messages[0]?.Body ?? "{}");
      const { Attributes } = await c.sqs.send(
        new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ["QueueArn"] }),
      );
      const [, , , region, account] = (Attributes?.QueueArn ?? "").split(":");
      return {
        failedEntryCount: put.FailedEntryCount,
        delivered: messages.length,
        envelope: {
          version: event.version,
          idIsString: typeof event.id === "string" && event.id !== "",
          "detail-type": event["detail-type"],
          source: event.source,
          sameAccount: event.account === account,
          sameRegion: event.region === region,
          timeIsIso: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(event.time),
          resources: event.resources,
          detail: event.detail,
        },
      };
    });
    // EventBridge User Guide, "Amazon EventBridge events": the envelope's top-level fields (time without
    // fractional seconds), account and region those of the bus.
    const aws = {
      failedEntryCount: 0,
      delivered: 1,
      envelope: {
        version: "0",
        idIsString: true,
        "detail-type": "order.created",
        source: "orders.service",
        sameAccount: true,
        sameRegion: true,
        timeIsIso: true,
        resources: ["arn:aws:example:::order/o-1"],
        detail: { orderId: "o-1" },
      },
    };
    const [reference, inProcess] = observed;
    expect(inProcess).toEqual(aws);
    // moto 5's event has no "account" field at all; AWS's always has it.
    expect({ ...reference, envelope: { ...reference.envelope, sameAccount: true } }).toEqual(aws);
  });
});

describe("Kinesis", () => {
  it("puts records on the shard their key hashes to, and reads each shard back in order from every iterator type", async () => {
    const observed = await both(async (c) => {
      const StreamName = unique("parity");
      await c.kinesis.send(new CreateStreamCommand({ StreamName, ShardCount: 2 }));
      const keys = ["order-1", "order-2", "order-3", "order-4"];
      const put = await c.kinesis.send(
        new PutRecordsCommand({
          StreamName,
          Records: Array.from({ length: 24 }, (_, i) => ({
            PartitionKey: keys[i % keys.length] as string,
            Data: Buffer.from(`${keys[i % keys.length]}#${i}`),
          })),
        }),
      );
      const shardOfKey: Record<string, string> = {};
      put.Records?.forEach((record, i) => {
        shardOfKey[keys[i % keys.length] as string] = record.ShardId as string;
      });
      const { StreamDescription } = await c.kinesis.send(new DescribeStreamCommand({ StreamName }));
      const shards: Record<string, { data: string[]; increasing: boolean }> = {};
      const iterate = async (
        ShardId: string,
        type: "AT_SEQUENCE_NUMBER" | "AFTER_SEQUENCE_NUMBER" | "LATEST" | "TRIM_HORIZON",
        sequence?: string,
      ) => {
        const { ShardIterator } = await c.kinesis.send(
          new GetShardIteratorCommand({
            StreamName,
            ShardId,
            ShardIteratorType: type,
            ...(sequence === undefined ? {} : { StartingSequenceNumber: sequence }),
          }),
        );
        const { Records = [] } = await c.kinesis.send(new GetRecordsCommand({ ShardIterator, Limit: 100 }));
        return Records;
      };
      let atAndAfter: string[][] = [];
      for (const shard of StreamDescription?.Shards ?? []) {
        const records = await iterate(shard.ShardId as string, "TRIM_HORIZON");
        const sequences = records.map((record) => BigInt(record.SequenceNumber as string));
        shards[shard.ShardId as string] = {
          data: records.map((record) => Buffer.from(record.Data ?? []).toString()),
          increasing: sequences.every((sequence, i) => i === 0 || sequence > (sequences[i - 1] as bigint)),
        };
        const third = records[2]?.SequenceNumber;
        if (third !== undefined && atAndAfter.length === 0) {
          atAndAfter = await Promise.all(
            (["AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER", "LATEST"] as const).map(async (type) =>
              (await iterate(shard.ShardId as string, type, type === "LATEST" ? undefined : third))
                .slice(0, 1)
                .map((record) => Buffer.from(record.Data ?? []).toString()),
            ),
          );
          atAndAfter.unshift(records.slice(2, 4).map((record) => Buffer.from(record.Data ?? []).toString()));
        }
      }
      return {
        shardCount: StreamDescription?.Shards?.length,
        failed: put.FailedRecordCount,
        shardOfKey,
        shards,
        atAndAfter,
      };
    });
    const [reference, inProcess] = observed;
    // Kinesis Developer Guide, "Terminology and concepts": a partition key's MD5, as a 128-bit integer, picks the
    // shard whose hash key range holds it; sequence numbers increase per shard; a shard's records come back in order.
    expect(inProcess.shardCount).toBe(2);
    expect(inProcess.failed).toBe(0);
    for (const shard of Object.values(inProcess.shards)) expect(shard.increasing).toBe(true);
    const [third, fourth] = inProcess.atAndAfter[0] as string[];
    // AT_SEQUENCE_NUMBER starts at that record, AFTER_SEQUENCE_NUMBER at the next, LATEST after the newest.
    expect(inProcess.atAndAfter.slice(1)).toEqual([[third], [fourth], []]);
    expect(reference).toEqual(inProcess);
  });
});

describe("S3", () => {
  it("puts, gets, heads and deletes an object; a missing key is NoSuchKey; re-creating one's own bucket succeeds", async () => {
    const observed = await both(async (c) => {
      const Bucket = unique("parity");
      await c.s3.send(new CreateBucketCommand({ Bucket }));
      const put = await c.s3.send(
        new PutObjectCommand({
          Bucket,
          Key: "payloads/1",
          Body: Buffer.from('{"n":1}'),
          ContentType: "application/json",
        }),
      );
      const got = await c.s3.send(new GetObjectCommand({ Bucket, Key: "payloads/1" }));
      const head = await c.s3.send(new HeadObjectCommand({ Bucket, Key: "payloads/1" }));
      await c.s3.send(new DeleteObjectCommand({ Bucket, Key: "payloads/1" }));
      const missing = await c.s3
        .send(new GetObjectCommand({ Bucket, Key: "payloads/1" }))
        .catch((caught: { name: string }) => caught.name);
      const again = await c.s3
        .send(new CreateBucketCommand({ Bucket }))
        .then(() => "ok")
        .catch((caught: { name: string }) => caught.name);
      return {
        etagMatches: put.ETag === got.ETag && got.ETag === head.ETag,
        checksum: got.ChecksumCRC32 === put.ChecksumCRC32 && put.ChecksumCRC32 !== undefined,
        body: await got.Body?.transformToString(),
        contentType: got.ContentType,
        length: head.ContentLength,
        missing,
        again,
      };
    });
    const [reference, inProcess] = observed;
    expect(inProcess).toEqual({
      etagMatches: true,
      checksum: true,
      body: '{"n":1}',
      contentType: "application/json",
      length: 7,
      missing: "NoSuchKey",
      // In us-east-1 S3 answers 200 to the owner re-creating its bucket (S3 API Reference, "CreateBucket").
      again: "ok",
    });
    expect(reference).toEqual(inProcess);
  });
});
