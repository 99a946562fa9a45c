import type { SQSClient } from "@aws-sdk/client-sqs";
import { ConfigError } from "../../outbox/errors.ts";
import { endpointInUse } from "../../util/awsClient.ts";
import { checkFailure, DestinationCheckError } from "../checkFailure.ts";
import type { DestinationCheck } from "../destination.ts";
import { sqsSdk } from "./sdk.ts";

/** SQS could not be asked (unreachable, timed out): says nothing about the queue, so try again later. */
export class QueueCheckError extends DestinationCheckError {
  override name = "QueueCheckError";
}

const MISSING_QUEUE = /QueueDoesNotExist|NonExistentQueue/;

/**
 * Asks SQS about the queue once before relaying (the CLI at start, the relay Lambda on its first invocation), so
 * the mistakes that would otherwise turn the whole backlog into "permanent" rejections and dead letters are named
 * at once: a queue that does not exist (wrong URL, region or endpoint), a standard queue (no MessageGroupId
 * ordering), and a MaximumMessageSize below what the relay sends (the queue default is still 262,144; every
 * bigger event would be dead-lettered). Those throw a ConfigError naming the fix; SQS being unreachable throws
 * a QueueCheckError. A role without sqs:GetQueueAttributes only skips the check (`verified: false`): publishing
 * needs SendMessage, not this, and the caller warns (checkFailure.ts, the same for every destination).
 */
export async function checkQueue(
  sqs: SQSClient,
  queueUrl: string,
  maxMessageBytes: number,
  endpoint: string | undefined,
  timeoutMs = 15_000,
  fifo = true,
): Promise<DestinationCheck> {
  let attributes: Record<string, string>;
  const { GetQueueAttributesCommand } = await sqsSdk();
  try {
    const response = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: ["FifoQueue", "MaximumMessageSize"],
      }),
      { abortSignal: AbortSignal.timeout(timeoutMs) },
    );
    attributes = response.Attributes ?? {};
  } catch (error) {
    return checkFailure(error, {
      service: "SQS",
      what: `queue ${queueUrl}`,
      missing: MISSING_QUEUE,
      missingHint: "check OUTBOX_QUEUE_URL / --queue-url, AWS_REGION and the endpoint",
      action: "sqs:GetQueueAttributes",
      endpoint: endpointInUse(endpoint, "SQS", new URL(queueUrl).origin),
      unreachable: QueueCheckError,
    });
  }
  if (!fifo && attributes.FifoQueue === "true") {
    throw new ConfigError(
      `queue ${queueUrl} is a FIFO queue but its route's kind is sqs (standard): SQS refuses a message without ` +
        "a MessageGroupId on a FIFO queue; set the route's kind to sqs-fifo",
    );
  }
  if (fifo && attributes.FifoQueue !== "true") {
    throw new ConfigError(
      `queue ${queueUrl} is not a FIFO queue: the relay needs one (per-aggregate order, deduplication by outbox ` +
        "id); point OUTBOX_QUEUE_URL at a .fifo queue",
    );
  }
  const maxSize = Number(attributes.MaximumMessageSize ?? Number.NaN);
  if (Number.isFinite(maxSize) && maxSize < maxMessageBytes) {
    throw new ConfigError(
      `queue ${queueUrl} accepts messages up to ${maxSize} bytes but the relay may send ${maxMessageBytes}: ` +
        `set the queue's MaximumMessageSize to ${maxMessageBytes}, or RELAY_MAX_MESSAGE_BYTES=${maxSize}`,
    );
  }
  return { verified: true };
}
