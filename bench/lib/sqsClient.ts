import { CreateQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import { LOCAL_AWS } from "../../local/awsEndpoint.ts";

/**
 * The SQS client exactly as functions/relay/handler.ts builds it (3 attempts, 3 s connect timeout, request
 * timeout = the publish timeout; the SDK's default agent, i.e. at most 50 sockets), pointed at the endpoint.
 */
export function relaySqsClient(endpoint: string, publishTimeoutMs: number): SQSClient {
  return new SQSClient({
    ...LOCAL_AWS,
    endpoint,
    maxAttempts: 3,
    requestHandler: { connectionTimeout: 3_000, requestTimeout: publishTimeoutMs },
  });
}

let queues = 0;

/** A fresh FIFO queue with the relay's settings (1 MiB messages), so no measurement sees another's dedup ids. */
export async function createBenchQueue(sqs: SQSClient, label: string): Promise<string> {
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand({
      QueueName: `bench-${label}-${++queues}.fifo`,
      Attributes: { FifoQueue: "true", MaximumMessageSize: "1048576" },
    }),
  );
  if (QueueUrl === undefined) throw new Error("CreateQueue returned no QueueUrl");
  return QueueUrl;
}
