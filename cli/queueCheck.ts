import { GetQueueAttributesCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { CliError, EXIT_FAILURE, EXIT_USAGE } from "./errors.ts";

export type QueueCheck = { verified: true } | { verified: false; reason: string };

const MISSING_QUEUE = /QueueDoesNotExist|NonExistentQueue/;
const NOT_ALLOWED = /AccessDenied|NotAuthorized|UnauthorizedOperation/;
const NETWORK = /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNRESET|socket hang up/;

/**
 * Asks SQS about the queue once before relaying, so the mistakes that would otherwise surface as endless publish
 * failures are named at start: a queue that does not exist (wrong URL, region or endpoint), a standard queue
 * (no MessageGroupId ordering), and a MaximumMessageSize below what the relay sends (the queue default is still
 * 262,144; every bigger event would be dead-lettered). A role without sqs:GetQueueAttributes only skips the
 * check: the relay needs SendMessage, not this.
 */
export async function checkQueue(
  sqs: SQSClient,
  queueUrl: string,
  maxMessageBytes: number,
  endpoint: string | undefined,
): Promise<QueueCheck> {
  let attributes: Record<string, string>;
  try {
    const response = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: ["FifoQueue", "MaximumMessageSize"],
      }),
      { abortSignal: AbortSignal.timeout(15_000) },
    );
    attributes = response.Attributes ?? {};
  } catch (error) {
    const name = (error as { name?: string }).name ?? "";
    const code = (error as { code?: string }).code ?? "";
    const message = error instanceof Error ? error.message : String(error);
    if (MISSING_QUEUE.test(`${name} ${message}`)) {
      throw new CliError(
        `queue ${queueUrl} does not exist (check --queue-url / OUTBOX_QUEUE_URL, AWS_REGION and the endpoint)`,
        EXIT_USAGE,
        { cause: error },
      );
    }
    if (NOT_ALLOWED.test(name))
      return { verified: false, reason: `not allowed to read queue attributes (${name})` };
    if (/Region is missing/i.test(message)) {
      throw new CliError("no AWS region: set AWS_REGION", EXIT_USAGE, { cause: error });
    }
    if (NETWORK.test(`${code} ${name} ${message}`)) {
      throw new CliError(
        `cannot reach SQS at ${endpoint ?? new URL(queueUrl).origin}: ${message}`,
        EXIT_FAILURE,
        {
          cause: error,
        },
      );
    }
    throw new CliError(`cannot check queue ${queueUrl}: ${name}: ${message}`, EXIT_FAILURE, { cause: error });
  }
  if (attributes.FifoQueue !== "true") {
    throw new CliError(
      `queue ${queueUrl} is not a FIFO queue: the relay needs one (per-aggregate order, deduplication by outbox id)`,
      EXIT_USAGE,
    );
  }
  const maxSize = Number(attributes.MaximumMessageSize ?? Number.NaN);
  if (Number.isFinite(maxSize) && maxSize < maxMessageBytes) {
    throw new CliError(
      `queue ${queueUrl} accepts messages up to ${maxSize} bytes but the relay may send ${maxMessageBytes}: ` +
        `set the queue's MaximumMessageSize to ${maxMessageBytes}, or RELAY_MAX_MESSAGE_BYTES=${maxSize}`,
      EXIT_USAGE,
    );
  }
  return { verified: true };
}
