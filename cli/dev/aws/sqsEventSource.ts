/**
 * What Lambda's SQS event source mapping does for a function, done in-process so the demo, the tests and the
 * bench run an inbox handler exactly as Lambda would call it: receive a batch (all message and system
 * attributes), hand it over as an SQS event, delete the records not listed in `batchItemFailures`, leave the
 * failed ones for SQS to deliver again (counting towards the queue's maxReceiveCount).
 *
 * One difference, on purpose: Lambda leaves a failed message invisible until its visibility timeout ends;
 * `retryFailedAfterSeconds` can make it visible sooner, so a test need not wait out the timeout.
 */
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import type { InboxLambdaHandler, SqsEvent, SqsRecord } from "../../../functions/shared/consumer/index.ts";

export interface EventSourceOptions {
  /** Up to 10 (the FIFO event source's limit). Default 10. */
  batchSize?: number;
  /** Long poll. Default 1 s, so a stop is noticed promptly. */
  waitSeconds?: number;
  /** Make failed messages visible again after this many seconds instead of the queue's visibility timeout. */
  retryFailedAfterSeconds?: number;
}

export interface PollResult {
  received: number;
  failed: number;
  failedMessageIds: string[];
  /** False when the batch was left undeleted on purpose (`acknowledge`). */
  acknowledged: boolean;
  /** The messages as received (for tests that inspect them). */
  messages: Message[];
}

/**
 * One receive, one handler call, one delete. `acknowledge: false` (or a function, asked once the handler has
 * returned, that says false) is a crash after the handler returned: nothing is deleted.
 */
export async function pollOnce(
  sqs: SQSClient,
  queueUrl: string,
  handler: InboxLambdaHandler,
  options: EventSourceOptions & { acknowledge?: boolean | (() => boolean); signal?: AbortSignal } = {},
): Promise<PollResult> {
  const { Messages: messages = [] } = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: options.batchSize ?? 10,
      WaitTimeSeconds: options.waitSeconds ?? 1,
      MessageAttributeNames: ["All"],
      MessageSystemAttributeNames: ["All"],
    }),
    options.signal === undefined ? {} : { abortSignal: options.signal },
  );
  if (messages.length === 0)
    return { received: 0, failed: 0, failedMessageIds: [], acknowledged: true, messages };
  const response = await handler(toSqsEvent(queueUrl, messages));
  const failedIds = new Set(response.batchItemFailures.map((failure) => failure.itemIdentifier));
  const result = {
    received: messages.length,
    failed: failedIds.size,
    failedMessageIds: [...failedIds],
    messages,
  };
  const acknowledge = typeof options.acknowledge === "function" ? options.acknowledge() : options.acknowledge;
  if (acknowledge === false) return { ...result, acknowledged: false };
  const entries = (keep: boolean) =>
    messages
      .map((message, index) => ({ message, index }))
      .filter(({ message }) => failedIds.has(message.MessageId ?? "") === keep);
  const done = entries(false);
  if (done.length > 0) {
    await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: done.map(({ message, index }) => ({
          Id: String(index),
          ReceiptHandle: message.ReceiptHandle,
        })),
      }),
    );
  }
  const failed = entries(true);
  if (failed.length > 0 && options.retryFailedAfterSeconds !== undefined) {
    await sqs.send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: queueUrl,
        Entries: failed.map(({ message, index }) => ({
          Id: String(index),
          ReceiptHandle: message.ReceiptHandle,
          VisibilityTimeout: options.retryFailedAfterSeconds,
        })),
      }),
    );
  }
  return { ...result, acknowledged: true };
}

/** The SQS event Lambda builds from received messages (the field names and shapes of the Lambda docs). */
export function toSqsEvent(queueUrl: string, messages: readonly Message[]): SqsEvent {
  const { region, arn } = queueArn(queueUrl);
  return {
    Records: messages.map((message): SqsRecord => {
      const system = message.Attributes ?? {};
      // Every system attribute received is passed on, as Lambda does (not only the ones SqsRecord names).
      const attributes: SqsRecord["attributes"] & Record<string, string | undefined> = {
        ApproximateReceiveCount: system.ApproximateReceiveCount ?? "1",
        SentTimestamp: system.SentTimestamp ?? "",
      };
      for (const [name, value] of Object.entries(system)) if (value !== undefined) attributes[name] = value;
      const messageAttributes: SqsRecord["messageAttributes"] = {};
      for (const [name, value] of Object.entries(message.MessageAttributes ?? {})) {
        messageAttributes[name] = {
          dataType: value.DataType ?? "String",
          ...(value.StringValue === undefined ? {} : { stringValue: value.StringValue }),
        };
      }
      return {
        messageId: message.MessageId ?? "",
        receiptHandle: message.ReceiptHandle ?? "",
        body: message.Body ?? "",
        attributes,
        messageAttributes,
        md5OfBody: message.MD5OfBody ?? "",
        eventSource: "aws:sqs",
        eventSourceARN: arn,
        awsRegion: region,
      };
    }),
  };
}

/** arn:aws:sqs:<region>:<account>:<name> from a queue URL (https://sqs.<region>.../<account>/<name>). */
function queueArn(queueUrl: string): { region: string; arn: string } {
  const url = new URL(queueUrl);
  const [account = "000000000000", name = ""] = url.pathname.split("/").filter(Boolean);
  const region = /sqs\.([a-z0-9-]+)\./.exec(url.hostname)?.[1] ?? "us-east-1";
  return { region, arn: `arn:aws:sqs:${region}:${account}:${name}` };
}
