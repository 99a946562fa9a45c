import { GetQueueAttributesCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { ConfigError, errorMessage, OutboxError } from "../../outbox/errors.ts";

export type QueueCheck = { verified: true } | { verified: false; reason: string };

/** SQS could not be asked (unreachable, timed out): says nothing about the queue, so try again later. */
export class QueueCheckError extends OutboxError {
  override name = "QueueCheckError";
}

const MISSING_QUEUE = /QueueDoesNotExist|NonExistentQueue/;
const NOT_ALLOWED = /AccessDenied|NotAuthorized|UnauthorizedOperation/;
const NETWORK = /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNRESET|socket hang up/;

/**
 * Asks SQS about the queue once before relaying (the CLI at start, the relay Lambda on its first invocation), so
 * the mistakes that would otherwise turn the whole backlog into "permanent" rejections and dead letters are named
 * at once: a queue that does not exist (wrong URL, region or endpoint), a standard queue (no MessageGroupId
 * ordering), and a MaximumMessageSize below what the relay sends (the queue default is still 262,144; every
 * bigger event would be dead-lettered). Those throw a ConfigError naming the fix; SQS being unreachable throws
 * a QueueCheckError. A role without sqs:GetQueueAttributes only skips the check (`verified: false`): publishing
 * needs SendMessage, not this, and the caller warns.
 */
export async function checkQueue(
  sqs: SQSClient,
  queueUrl: string,
  maxMessageBytes: number,
  endpoint: string | undefined,
  timeoutMs = 15_000,
  fifo = true,
): Promise<QueueCheck> {
  let attributes: Record<string, string>;
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
    const name = (error as { name?: string }).name ?? "";
    const code = (error as { code?: string }).code ?? "";
    const message = error instanceof Error ? error.message : String(error);
    if (MISSING_QUEUE.test(`${name} ${message}`)) {
      throw new ConfigError(
        `queue ${queueUrl} does not exist (check OUTBOX_QUEUE_URL / --queue-url, AWS_REGION and the endpoint)`,
        { cause: error },
      );
    }
    if (NOT_ALLOWED.test(name))
      return {
        verified: false,
        reason: `not allowed to read queue attributes (${name}): grant sqs:GetQueueAttributes on the queue`,
      };
    if (/Region is missing/i.test(message)) {
      throw new ConfigError("no AWS region: set AWS_REGION", { cause: error });
    }
    if (NETWORK.test(`${code} ${name} ${message}`)) {
      throw new QueueCheckError(`cannot reach SQS at ${endpoint ?? new URL(queueUrl).origin}: ${message}`, {
        cause: error,
      });
    }
    throw new QueueCheckError(`cannot check queue ${queueUrl}: ${errorMessage(error)}`, { cause: error });
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
