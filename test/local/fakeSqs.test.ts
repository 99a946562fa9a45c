import { createHash, randomBytes } from "node:crypto";
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  type Message,
  type MessageAttributeValue,
  PurgeQueueCommand,
  QueueDoesNotExist,
  ReceiveMessageCommand,
  RequestThrottled,
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  SendMessageCommand,
  SQSClient,
  type SQSClientConfig,
  TooManyEntriesInBatchRequest,
} from "@aws-sdk/client-sqs";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { type FakeSqs, startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { seededRandom } from "../support/seededRandom.ts";
import { createFifoQueue, sqsClient } from "../support/sqs.ts";

let fake: FakeSqs;
let sqs: SQSClient;
const clients: SQSClient[] = [];

/** A real SDK client against the fake; MD5 validation stays on (the SDK default). */
function client(config: SQSClientConfig = {}): SQSClient {
  const created = new SQSClient({ ...LOCAL_AWS, endpoint: fake.url, ...config });
  clients.push(created);
  return created;
}

async function fifoQueue(attributes: Record<string, string> = {}): Promise<{ name: string; url: string }> {
  const name = `fake-${randomBytes(4).toString("hex")}.fifo`;
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand({ QueueName: name, Attributes: { FifoQueue: "true", ...attributes } }),
  );
  expect(QueueUrl).toBe(`${fake.url}/000000000000/${name}`);
  return { name, url: QueueUrl ?? "" };
}

const entry = (id: string, group: string, extra: Partial<SendMessageBatchRequestEntry> = {}) => ({
  Id: id,
  MessageBody: `body-${id}`,
  MessageGroupId: group,
  MessageDeduplicationId: `dedup-${id}-${randomBytes(4).toString("hex")}`,
  ...extra,
});

beforeAll(async () => {
  fake = await startFakeSqs();
  sqs = client();
});

afterEach(() => {
  fake.resetFaults();
  fake.up();
});

afterAll(async () => {
  for (const c of clients) c.destroy();
  await fake.close();
});

describe("fake SQS speaks the JSON protocol to the real SDK", () => {
  it("round-trips a FIFO SendMessageBatch with attributes, receives and deletes", async () => {
    const queue = await fifoQueue();
    const attributes: Record<string, MessageAttributeValue> = {
      eventType: { DataType: "String", StringValue: "OrderPlaced" },
      version: { DataType: "Number", StringValue: "3" },
      blob: { DataType: "Binary", BinaryValue: Uint8Array.of(0, 1, 2, 255) },
      "trace.id": { DataType: "String.custom", StringValue: "żółw ✓" },
    };
    const sent = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queue.url,
        Entries: [
          entry("a1", "order-a", { MessageAttributes: attributes, MessageBody: '{"n":"ünïcødé 🚀"}' }),
          entry("b1", "order-b"),
          entry("a2", "order-a"),
        ],
      }),
    );
    // The SDK verified MD5OfMessageBody for each entry; check the attribute MD5 independently.
    expect(sent.Failed ?? []).toEqual([]);
    expect(sent.Successful?.map((s) => s.Id)).toEqual(["a1", "b1", "a2"]);
    expect(sent.Successful?.[0]?.MD5OfMessageAttributes).toBe(referenceAttributesMd5(attributes));
    const sequence = sent.Successful?.map((s) => BigInt(s.SequenceNumber ?? "0")) ?? [];
    expect(sequence[0]).toBeLessThan(sequence[1] ?? 0n);
    expect(sequence[1]).toBeLessThan(sequence[2] ?? 0n);

    expect(fake.deliveries(queue.name)).toMatchObject([
      {
        groupId: "order-a",
        body: '{"n":"ünïcødé 🚀"}',
        attributes: { eventType: "OrderPlaced", version: "3", blob: "AAEC/w==", "trace.id": "żółw ✓" },
        duplicate: false,
      },
      { groupId: "order-b", body: "body-b1", attributes: {}, duplicate: false },
      { groupId: "order-a", body: "body-a2", duplicate: false },
    ]);

    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queue.url,
        MaxNumberOfMessages: 10,
        MessageAttributeNames: ["All"],
        MessageSystemAttributeNames: ["All"],
      }),
    );
    // As many as possible from one group first, in order; the SDK checked every MD5OfBody.
    expect(Messages.map((m) => m.Body)).toEqual(['{"n":"ünïcødé 🚀"}', "body-a2", "body-b1"]);
    const [first] = Messages;
    expect(first?.MessageAttributes?.eventType).toEqual({ DataType: "String", StringValue: "OrderPlaced" });
    expect(first?.MessageAttributes?.blob?.BinaryValue).toEqual(Uint8Array.of(0, 1, 2, 255));
    expect(first?.MD5OfMessageAttributes).toBe(referenceAttributesMd5(attributes));
    expect(first?.Attributes).toMatchObject({
      MessageGroupId: "order-a",
      MessageDeduplicationId: expect.stringMatching(/^dedup-a1-/),
      SequenceNumber: sent.Successful?.[0]?.SequenceNumber,
      ApproximateReceiveCount: "1",
      SentTimestamp: expect.stringMatching(/^\d{13}$/),
    });

    const deleted = await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queue.url,
        Entries: Messages.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle })),
      }),
    );
    expect(deleted.Successful).toHaveLength(3);
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: queue.url, AttributeNames: ["All"] }),
    );
    expect(Attributes).toMatchObject({
      ApproximateNumberOfMessages: "0",
      ApproximateNumberOfMessagesNotVisible: "0",
      FifoQueue: "true",
      MaximumMessageSize: "1048576",
      QueueArn: `arn:aws:sqs:us-east-1:000000000000:${queue.name}`,
    });
  });

  it(`computes MD5OfMessageAttributes like the reference endpoint (${inject("awsSource")})`, async () => {
    const attributes: Record<string, MessageAttributeValue> = {
      b: { DataType: "Binary", BinaryValue: Uint8Array.of(9, 8, 7) },
      a: { DataType: "String", StringValue: "ąę" },
      n: { DataType: "Number.int", StringValue: "-12.5" },
    };
    const send = (client: SQSClient, url: string) =>
      client.send(
        new SendMessageCommand({
          QueueUrl: url,
          MessageBody: "x",
          MessageGroupId: "g",
          MessageDeduplicationId: "d",
          MessageAttributes: attributes,
        }),
      );
    const reference = sqsClient();
    try {
      const expected = await send(reference, await createFifoQueue(reference, "fake-md5"));
      const actual = await send(sqs, (await fifoQueue()).url);
      expect(actual.MD5OfMessageAttributes).toBe(expected.MD5OfMessageAttributes);
      expect(actual.MD5OfMessageBody).toBe(expected.MD5OfMessageBody);
    } finally {
      reference.destroy();
    }
  });

  it("supports standard queues, SendMessage, GetQueueUrl, PurgeQueue and DeleteQueue", async () => {
    const name = `fake-std-${randomBytes(4).toString("hex")}`;
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: name }));
    expect((await sqs.send(new GetQueueUrlCommand({ QueueName: name }))).QueueUrl).toBe(QueueUrl);
    const sent = await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "hello" }));
    expect(sent.MD5OfMessageBody).toBe(createHash("md5").update("hello").digest("hex"));
    expect(sent.SequenceNumber).toBeUndefined();
    await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "world" }));
    await sqs.send(new PurgeQueueCommand({ QueueUrl }));
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl,
        AttributeNames: ["ApproximateNumberOfMessages", "FifoQueue"],
      }),
    );
    // FifoQueue is not an attribute of a standard queue.
    expect(Attributes).toEqual({ ApproximateNumberOfMessages: "0" });
    await sqs.send(new DeleteQueueCommand({ QueueUrl }));
    await expect(sqs.send(new GetQueueUrlCommand({ QueueName: name }))).rejects.toBeInstanceOf(
      QueueDoesNotExist,
    );
  });

  it("never hands out a group's next message while one of the group is in flight", async () => {
    const queue = await fifoQueue();
    await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queue.url,
        Entries: [entry("g1m1", "g1"), entry("g1m2", "g1"), entry("g2m1", "g2")],
      }),
    );
    const receive = async (max: number, visibility?: number) =>
      (
        await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queue.url,
            MaxNumberOfMessages: max,
            VisibilityTimeout: visibility,
            MessageSystemAttributeNames: ["ApproximateReceiveCount"],
          }),
        )
      ).Messages ?? [];

    const [g1m1] = await receive(1);
    expect(g1m1?.Body).toBe("body-g1m1");
    expect((await receive(10)).map((m) => m.Body)).toEqual(["body-g2m1"]);
    expect(await receive(10)).toEqual([]);

    // Visible again (timeout 0): the same message comes back first, with its receive count up.
    await sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: queue.url,
        ReceiptHandle: g1m1?.ReceiptHandle,
        VisibilityTimeout: 0,
      }),
    );
    const [again] = await receive(1);
    expect(again?.Body).toBe("body-g1m1");
    expect(again?.Attributes?.ApproximateReceiveCount).toBe("2");
    // The old receipt handle is stale: deleting with it succeeds but deletes nothing.
    await sqs.send(new DeleteMessageCommand({ QueueUrl: queue.url, ReceiptHandle: g1m1?.ReceiptHandle }));
    expect(await receive(10)).toEqual([]);

    await sqs.send(new DeleteMessageCommand({ QueueUrl: queue.url, ReceiptHandle: again?.ReceiptHandle }));
    expect((await receive(10)).map((m) => m.Body)).toEqual(["body-g1m2"]);
  });

  it("keeps each group's order through holds, redeliveries and deletes (seeded random consumer)", async () => {
    const queue = await fifoQueue();
    const groups = Array.from({ length: 7 }, (_, i) => `g${i}`);
    const sentOrder = new Map(groups.map((g) => [g, [] as string[]]));
    for (let batch = 0; batch < 15; batch++) {
      const entries = Array.from({ length: 10 }, (_, i) => {
        const group = groups[(batch * 10 + i * 3) % groups.length] ?? "g0";
        const id = `m${batch}_${i}`;
        sentOrder.get(group)?.push(`body-${id}`);
        return entry(id, group);
      });
      await sqs.send(new SendMessageBatchCommand({ QueueUrl: queue.url, Entries: entries }));
    }

    const random = seededRandom(42);
    const groupOf = (m: Message) => m.Attributes?.MessageGroupId ?? "";
    const deletedOrder = new Map(groups.map((g) => [g, [] as string[]]));
    let held: Message[] = [];
    for (let round = 0; round < 1000 && [...deletedOrder.values()].flat().length < 150; round++) {
      const { Messages = [] } = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queue.url,
          MaxNumberOfMessages: 10,
          VisibilityTimeout: 600,
          MessageSystemAttributeNames: ["MessageGroupId"],
        }),
      );
      const heldGroups = new Set(held.map(groupOf));
      expect(Messages.filter((m) => heldGroups.has(groupOf(m)))).toEqual([]);
      // One decision per group per round (hold, release or delete all of it), so the consumer stays in order.
      const byGroup = Map.groupBy([...held, ...Messages], groupOf);
      held = [];
      const toDelete: Message[] = [];
      for (const [group, messages] of byGroup) {
        const choice = random();
        if (choice < 0.25) held.push(...messages);
        else if (choice < 0.5) {
          for (const m of messages) {
            await sqs.send(
              new ChangeMessageVisibilityCommand({
                QueueUrl: queue.url,
                ReceiptHandle: m.ReceiptHandle,
                VisibilityTimeout: 0,
              }),
            );
          }
        } else {
          toDelete.push(...messages);
          deletedOrder.get(group)?.push(...messages.map((m) => m.Body ?? ""));
        }
      }
      for (let i = 0; i < toDelete.length; i += 10) {
        const { Failed = [] } = await sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: queue.url,
            Entries: toDelete
              .slice(i, i + 10)
              .map((m, k) => ({ Id: `d${k}`, ReceiptHandle: m.ReceiptHandle })),
          }),
        );
        expect(Failed).toEqual([]);
      }
    }
    expect(deletedOrder).toEqual(sentOrder);
    expect(fake.queueDepth(queue.name)).toMatchObject({ visible: 0, inFlight: 0 });
  });

  it("wakes a long poll when a message arrives, and returns a message whose visibility timed out", async () => {
    const queue = await fifoQueue();
    const polling = sqs.send(
      new ReceiveMessageCommand({ QueueUrl: queue.url, WaitTimeSeconds: 20, VisibilityTimeout: 1 }),
    );
    await vi.waitUntil(() => fake.queueDepth(queue.name)?.longPolls === 1, { timeout: 10_000 });
    const started = Date.now();
    await sqs.send(new SendMessageBatchCommand({ QueueUrl: queue.url, Entries: [entry("m", "g")] }));
    const { Messages } = await polling;
    expect(Messages?.map((m) => m.Body)).toEqual(["body-m"]);
    expect(Date.now() - started).toBeLessThan(5_000);

    // In flight for 1 s; a second long poll gets it back when the visibility timeout ends.
    const { Messages: redelivered } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queue.url,
        WaitTimeSeconds: 10,
        MessageSystemAttributeNames: ["All"],
      }),
    );
    expect(redelivered?.[0]?.MessageId).toBe(Messages?.[0]?.MessageId);
    expect(redelivered?.[0]?.Attributes?.ApproximateReceiveCount).toBe("2");
  });
});

describe("fake SQS validates like SQS FIFO", () => {
  it("deduplicates within the window (accepted, not enqueued) and delivers again after it", async () => {
    const queue = await fifoQueue();
    const send = () =>
      sqs.send(
        new SendMessageCommand({
          QueueUrl: queue.url,
          MessageBody: "once",
          MessageGroupId: "g",
          MessageDeduplicationId: "same-id",
        }),
      );
    const first = await send();
    const second = await send();
    expect(second.MessageId).toBe(first.MessageId);
    expect(second.SequenceNumber).toBe(first.SequenceNumber);
    expect(fake.deliveries(queue.name).map((d) => d.duplicate)).toEqual([false, true]);
    expect(fake.queueDepth(queue.name)?.visible).toBe(1);

    const window = fake.dedupWindowMs;
    fake.dedupWindowMs = 0; // every earlier id has now expired
    try {
      const third = await send();
      expect(third.MessageId).not.toBe(first.MessageId);
      expect(BigInt(third.SequenceNumber ?? "0")).toBeGreaterThan(BigInt(first.SequenceNumber ?? "0"));
      expect(fake.queueDepth(queue.name)?.visible).toBe(2);
    } finally {
      fake.dedupWindowMs = window;
    }

    // Content-based deduplication: the body's SHA-256 is the id.
    const cbd = await fifoQueue({ ContentBasedDeduplication: "true" });
    for (let i = 0; i < 2; i++) {
      await sqs.send(
        new SendMessageCommand({ QueueUrl: cbd.url, MessageBody: "same body", MessageGroupId: "g" }),
      );
    }
    expect(fake.deliveries(cbd.name).map((d) => [d.dedupId, d.duplicate])).toEqual([
      [createHash("sha256").update("same body").digest("hex"), false],
      [createHash("sha256").update("same body").digest("hex"), true],
    ]);
  });

  it("reports per-entry validation failures in Failed with SenderFault, and accepts the rest", async () => {
    const queue = await fifoQueue({ MaximumMessageSize: "1024" });
    const elevenAttributes = Object.fromEntries(
      Array.from({ length: 11 }, (_, i) => [`a${i}`, { DataType: "String", StringValue: "v" }]),
    );
    const failedBefore = fake.stats.failedEntries;
    const result = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queue.url,
        Entries: [
          entry("ok", "g"),
          entry("badGroup", "has space"),
          entry("longGroup", "x".repeat(129)),
          entry("badChars", "g", { MessageBody: "nul \u0000 char" }),
          entry("loneSurrogate", "g", { MessageBody: "half \ud800" }),
          entry("tooManyAttributes", "g", { MessageAttributes: elevenAttributes }),
          // 1000 body bytes + 5 + 6 + 20 attribute bytes > 1024: attributes count toward the size.
          entry("tooBig", "g", {
            MessageBody: "x".repeat(1000),
            MessageAttributes: { attr1: { DataType: "String", StringValue: "y".repeat(20) } },
          }),
          entry("okToo", "g2", { MessageBody: "x".repeat(1000) }),
        ],
      }),
    );
    expect(result.Successful?.map((s) => s.Id)).toEqual(["ok", "okToo"]);
    const failed = Object.fromEntries((result.Failed ?? []).map((f) => [f.Id, [f.Code, f.SenderFault]]));
    expect(failed).toEqual({
      badGroup: ["InvalidParameterValue", true],
      longGroup: ["InvalidParameterValue", true],
      badChars: ["InvalidMessageContents", true],
      loneSurrogate: ["InvalidMessageContents", true],
      tooManyAttributes: ["InvalidParameterValue", true],
      tooBig: ["InvalidParameterValue", true],
    });
    expect(fake.stats.failedEntries - failedBefore).toBe(6);
    expect(fake.deliveries(queue.name).map((d) => d.body)).toEqual(["body-ok", "x".repeat(1000)]);
  });

  it("rejects batch-level problems as whole-request errors", async () => {
    const queue = await fifoQueue();
    const send = (Entries: SendMessageBatchRequestEntry[]) =>
      sqs.send(new SendMessageBatchCommand({ QueueUrl: queue.url, Entries }));
    const eleven = Array.from({ length: 11 }, (_, i) => entry(`e${i}`, "g"));

    const tooMany = await send(eleven).catch((e: unknown) => e);
    expect(tooMany).toBeInstanceOf(TooManyEntriesInBatchRequest);
    expect(tooMany).toMatchObject({ Code: "AWS.SimpleQueueService.TooManyEntriesInBatchRequest" });
    await expect(send([entry("x", "g"), entry("x", "g")])).rejects.toMatchObject({
      name: "BatchEntryIdsNotDistinct",
    });
    await expect(send([])).rejects.toMatchObject({ name: "EmptyBatchRequest" });
    await expect(send([entry("bad id!", "g")])).rejects.toMatchObject({ name: "InvalidBatchEntryId" });
    // A FIFO entry without its group, or its deduplication id (no content-based deduplication), fails the whole
    // batch on AWS (LocalStack's AWS-validated test_send_batch_missing_message_group_id_for_fifo_queue).
    await expect(
      send([entry("ok", "g"), entry("noGroup", "g", { MessageGroupId: undefined })]),
    ).rejects.toMatchObject({
      name: "MissingParameter",
      message: "The request must contain the parameter MessageGroupId.",
    });
    await expect(
      send([entry("ok", "g"), entry("noDedup", "g", { MessageDeduplicationId: undefined })]),
    ).rejects.toMatchObject({ name: "InvalidParameterValue" });
    const half = "x".repeat(600 * 1024);
    await expect(
      send([entry("h1", "g", { MessageBody: half }), entry("h2", "g", { MessageBody: half })]),
    ).rejects.toMatchObject({ name: "BatchRequestTooLong" });
    await expect(
      sqs.send(
        new SendMessageCommand({ QueueUrl: queue.url, MessageBody: "x", MessageDeduplicationId: "d" }),
      ),
    ).rejects.toMatchObject({ name: "MissingParameter", $metadata: { httpStatusCode: 400 } });
    await expect(
      sqs.send(new SendMessageCommand({ QueueUrl: `${fake.url}/000000000000/nope.fifo`, MessageBody: "x" })),
    ).rejects.toBeInstanceOf(QueueDoesNotExist);
    expect(fake.deliveries(queue.name)).toEqual([]);
  });
});

describe("fake SQS fault injection, observed through the SDK", () => {
  it("failEntry puts chosen entries in Failed with the given code and fault", async () => {
    const queue = await fifoQueue();
    fake.setFaults({
      failEntry: (e, queueName) =>
        queueName === queue.name && e.MessageGroupId === "poison"
          ? { code: "InternalError", senderFault: false }
          : false,
    });
    const result = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queue.url,
        Entries: [entry("a", "healthy"), entry("b", "poison"), entry("c", "healthy")],
      }),
    );
    expect(result.Successful?.map((s) => s.Id)).toEqual(["a", "c"]);
    expect(result.Failed).toEqual([
      { Id: "b", Code: "InternalError", SenderFault: false, Message: "Injected InternalError" },
    ]);
    expect(fake.deliveries(queue.name).map((d) => d.groupId)).toEqual(["healthy", "healthy"]);
  });

  it("throttle answers a throttling error the SDK classifies as such and retries", async () => {
    const queue = await fifoQueue();
    const once = client({ maxAttempts: 1 });
    const throttledBefore = fake.stats.throttled;
    fake.setFaults({ throttle: 1 });
    const error = await once
      .send(new SendMessageBatchCommand({ QueueUrl: queue.url, Entries: [entry("a", "g")] }))
      .catch((e: unknown) => e);
    expect(error).toMatchObject({
      name: "ThrottlingException",
      Code: "ThrottlingException",
      $fault: "client",
      $metadata: { httpStatusCode: 400, attempts: 1 },
    });
    fake.setFaults({ throttleCode: "RequestThrottled" });
    await expect(
      once.send(new SendMessageBatchCommand({ QueueUrl: queue.url, Entries: [entry("a", "g")] })),
    ).rejects.toBeInstanceOf(RequestThrottled);
    expect(fake.stats.throttled - throttledBefore).toBe(2);
    expect(fake.deliveries(queue.name)).toEqual([]);

    // The SDK's standard retry treats it as retryable: throttle only the first attempt.
    let calls = 0;
    fake.setFaults({ throttle: (action) => action === "SendMessageBatch" && calls++ === 0 });
    const sent = await sqs.send(
      new SendMessageBatchCommand({ QueueUrl: queue.url, Entries: [entry("a", "g")] }),
    );
    expect(sent.$metadata.attempts).toBe(2);
    expect(fake.deliveries(queue.name)).toHaveLength(1);
  });

  it("failRequests answers 500 InternalError (retried by the SDK) or a chosen error", async () => {
    const queue = await fifoQueue();
    const once = client({ maxAttempts: 1 });
    fake.setFaults({ failRequests: true });
    await expect(
      once.send(new SendMessageBatchCommand({ QueueUrl: queue.url, Entries: [entry("a", "g")] })),
    ).rejects.toMatchObject({ name: "InternalError", $fault: "server", $metadata: { httpStatusCode: 500 } });
    fake.setFaults({ failRequests: () => ({ code: "QueueDoesNotExist" }) });
    await expect(
      once.send(new SendMessageBatchCommand({ QueueUrl: queue.url, Entries: [entry("a", "g")] })),
    ).rejects.toBeInstanceOf(QueueDoesNotExist);
    expect(fake.deliveries(queue.name)).toEqual([]);

    fake.setFaults({ failRequests: (_action, request) => request.n % 2 === 1 });
    const sent = await sqs.send(
      new SendMessageBatchCommand({ QueueUrl: queue.url, Entries: [entry("a", "g")] }),
    );
    expect(sent.Successful).toHaveLength(1);
  });

  it("dropResponse accepts and records the send but the SDK never hears back", async () => {
    const queue = await fifoQueue();
    const once = client({ maxAttempts: 1 });
    fake.setFaults({ dropResponse: true });
    const batch = { QueueUrl: queue.url, Entries: [entry("a", "g")] };
    await expect(once.send(new SendMessageBatchCommand(batch))).rejects.toThrow();
    expect(fake.deliveries(queue.name)).toMatchObject([{ body: "body-a", duplicate: false }]);
    expect(fake.queueDepth(queue.name)?.visible).toBe(1);

    // With retries, the SDK resends the same entry; FIFO deduplication absorbs it.
    let drops = 0;
    fake.setFaults({ dropResponse: (action) => action === "SendMessageBatch" && drops++ === 0 });
    const resent = await sqs.send(new SendMessageBatchCommand(batch));
    expect(resent.Successful).toHaveLength(1);
    expect(fake.deliveries(queue.name).map((d) => d.duplicate)).toEqual([false, true, true]);
    expect(fake.queueDepth(queue.name)?.visible).toBe(1);
  });

  it("latencyMs delays requests, per action when a function", async () => {
    const queue = await fifoQueue();
    fake.setFaults({ latencyMs: (action) => (action === "SendMessageBatch" ? 300 : 0) });
    const finished: string[] = [];
    const started = performance.now();
    const slow = sqs
      .send(new SendMessageBatchCommand({ QueueUrl: queue.url, Entries: [entry("a", "g")] }))
      .then(() => {
        finished.push("SendMessageBatch");
        return performance.now() - started;
      });
    const fast = sqs
      .send(new GetQueueAttributesCommand({ QueueUrl: queue.url, AttributeNames: ["All"] }))
      .then(() => finished.push("GetQueueAttributes"));
    const [elapsed] = await Promise.all([slow, fast]);
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(finished).toEqual(["GetQueueAttributes", "SendMessageBatch"]);
  });

  it("down() fails every request until up()", async () => {
    const queue = await fifoQueue();
    const once = client({ maxAttempts: 1 });
    const send = () =>
      once.send(new SendMessageBatchCommand({ QueueUrl: queue.url, Entries: [entry("a", "g")] }));
    fake.down();
    await expect(send()).rejects.toMatchObject({
      code: expect.stringMatching(/^(ECONNRESET|EPIPE|ECONNREFUSED)$/),
    });
    fake.down("unavailable");
    await expect(send()).rejects.toMatchObject({
      name: "ServiceUnavailable",
      $metadata: { httpStatusCode: 503 },
    });
    expect(fake.deliveries(queue.name)).toEqual([]);
    fake.up();
    expect((await send()).Successful).toHaveLength(1);
  });
});

/** MD5OfMessageAttributes per the SQS documentation, written independently of the fake. */
function referenceAttributesMd5(attributes: Record<string, MessageAttributeValue>): string {
  const hash = createHash("md5");
  const withLength = (bytes: Uint8Array) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    hash.update(length);
    hash.update(bytes);
  };
  for (const name of Object.keys(attributes).sort()) {
    const value = attributes[name];
    if (value === undefined) continue;
    withLength(Buffer.from(name));
    withLength(Buffer.from(value.DataType ?? ""));
    if (value.BinaryValue !== undefined) {
      hash.update(Buffer.of(2));
      withLength(value.BinaryValue);
    } else {
      hash.update(Buffer.of(1));
      withLength(Buffer.from(value.StringValue ?? ""));
    }
  }
  return hash.digest("hex");
}
