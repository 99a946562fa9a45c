import { randomBytes } from "node:crypto";
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  type Message,
  ReceiveMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, inject } from "vitest";
import { type FakeSqs, startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";

/**
 * This test file's own in-process SQS endpoint (cli/dev/aws/fakeSqs.ts: faults, latency, the deliveries it accepted) and
 * an SDK client of it without SDK retries: the relay's own backoff is what the tests exercise, and the SDK's
 * throttling backoff starts at 1 s. Call at the top level of a test file; use `fake` and `sqs` inside tests.
 */
export function useFakeSqs(): { fake: FakeSqs; sqs: SQSClient } {
  const state = {} as { fake: FakeSqs; sqs: SQSClient };
  beforeAll(async () => {
    state.fake = await startFakeSqs();
    state.sqs = new SQSClient({ ...LOCAL_AWS, endpoint: state.fake.url, maxAttempts: 1 });
  });
  afterAll(async () => {
    state.sqs?.destroy();
    await state.fake?.close();
  });
  return state;
}

export function sqsClient(endpoint = inject("awsEndpoint")): SQSClient {
  return new SQSClient({ ...LOCAL_AWS, endpoint });
}

export async function createFifoQueue(sqs: SQSClient, prefix = "outbox-test"): Promise<string> {
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand({
      QueueName: `${prefix}-${randomBytes(4).toString("hex")}.fifo`,
      Attributes: { FifoQueue: "true", MaximumMessageSize: "1048576", VisibilityTimeout: "60" },
    }),
  );
  if (QueueUrl === undefined) throw new Error("CreateQueue returned no QueueUrl");
  return QueueUrl;
}

/**
 * Receives (and deletes, so FIFO releases each group's next message) until `count` messages arrived or
 * `timeoutMs` passed. Long polls; no fixed sleeps.
 */
export async function receiveAll(sqs: SQSClient, queueUrl: string, count: number, timeoutMs = 20_000) {
  const messages: Message[] = [];
  const deadline = Date.now() + timeoutMs;
  while (messages.length < count && Date.now() < deadline) {
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ["All"],
        MessageSystemAttributeNames: ["All"],
      }),
    );
    messages.push(...Messages);
    if (Messages.length > 0) {
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: Messages.map((message, index) => ({
            Id: String(index),
            ReceiptHandle: message.ReceiptHandle,
          })),
        }),
      );
    }
  }
  return messages;
}
