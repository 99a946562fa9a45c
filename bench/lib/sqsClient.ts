import { CreateQueueCommand, DeleteQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import { type CreatedDestination, createDestination } from "../../functions/shared/destinations/create.ts";
import { SQS_MAX_MESSAGE_BYTES } from "../../functions/shared/destinations/sqs/limits.ts";
import type { RelayOptions } from "../../functions/shared/relay/engine.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";

/**
 * The relay's SQS FIFO destination built by the handler's own code (destinations/create.ts: 3 attempts, 3 s
 * connect timeout, request timeout = the publish timeout, an agent with a socket per request in flight, i.e.
 * concurrency × parallel rounds, and SQS's per-entry MD5 check off), pointed at the bench endpoint. Until
 * 2026-12-01 the bench built its own client with the SDK's defaults (MD5 check on, at most 50 sockets for the
 * default 4 × 25 requests in flight): not the relay that ships.
 */
export async function relayDestination(
  endpoint: string,
  queueUrl: string,
  options: RelayOptions,
): Promise<CreatedDestination> {
  return createDestination(
    { kind: "sqs-fifo", queueUrl, maxMessageBytes: SQS_MAX_MESSAGE_BYTES },
    {
      sockets: options.concurrency * options.parallelRounds,
      requestTimeoutMs: options.publishTimeoutMs,
      endpoint,
      ...LOCAL_AWS,
    },
  );
}

/**
 * A plain SQS client for the bench's own calls (creating queues) and for the baseline and consumer measurements,
 * which model other code than the relay: 3 attempts, 3 s connect timeout, the SDK's default agent and checks.
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

/**
 * Deletes a measurement's queue when it is done. The endpoint keeps every message sent to a queue (nothing
 * receives them), about 1.8 KB of its heap each: by the latency part of a full run, the throughput parts had
 * left ~630,000 messages, 1.1 GB of heap in the endpoint's thread, whose GC pauses (scavenges of 170-340 ms on
 * the loaded machine, against 75-100 ms with an empty endpoint) then stalled every request in flight; the
 * latency run charged them to the relay. Measured with the stall report, docs/benchmarks.md.
 */
export async function deleteBenchQueue(sqs: SQSClient, queueUrl: string): Promise<void> {
  await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
}
