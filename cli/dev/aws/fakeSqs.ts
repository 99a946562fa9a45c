/**
 * A fast in-process SQS endpoint for throughput, fault and chaos tests. It speaks the protocol the AWS SDK v3
 * uses for SQS (AWS JSON 1.0 with `awsQueryCompatible` errors), so an unmodified `SQSClient` pointed at `url`
 * works against it, and it can be made to fail in the ways real SQS fails (throttling, 5xx, one batch entry
 * rejected, a response lost after the send was accepted, the endpoint unreachable). The same URL serves
 * EventBridge (`AWSEvents.*`, eventBridge.ts), delivering matched events to this endpoint's queues.
 *
 * Not modelled: retention, dead-letter redrive, purge rate limits, ReceiveRequestAttemptId, permissions, tags.
 * Conformance questions belong to the moto/LocalStack tests; this one is for speed and fault injection.
 *
 * This module is the entry point (`outbox dev`, the demo, tests and the bench): startFakeSqs and the types
 * callers use. The parts, one concern each: server.ts (HTTP, routing, request faults), sns.ts, kinesis.ts,
 * eventBridge.ts (the other services on the same URL), sqsService.ts (the SQS actions), sqsQueue.ts (the queue model),
 * sqsValidation.ts (what SQS accepts), sqsWire.ts (the JSON protocol), faults.ts (fault injection).
 */
import { type FakeSqs, LocalAwsServer } from "./server.ts";

export type { EntryFailure, ErrorSpec, Faults, RequestInfo } from "./faults.ts";
export type { QueueAttributes, QueueDepth } from "./sqsQueue.ts";
export type { Delivery, FakeSqsStats } from "./sqsService.ts";
export type { SendEntry } from "./sqsWire.ts";
export type { FakeSqs };

const DEFAULT_DEDUP_WINDOW_MS = 5 * 60_000;

export interface FakeSqsOptions {
  port?: number;
  dedupWindowMs?: number;
}

export async function startFakeSqs(options: FakeSqsOptions = {}): Promise<FakeSqs> {
  const fake = new LocalAwsServer(options.dedupWindowMs ?? DEFAULT_DEDUP_WINDOW_MS);
  await fake.listen(options.port ?? 0);
  return fake;
}
