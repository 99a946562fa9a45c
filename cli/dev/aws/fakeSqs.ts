/**
 * The in-process AWS endpoint: what `outbox dev` runs instead of LocalStack or moto, and what the tests, the demo
 * and the bench use for speed and fault injection. One URL serves SQS (AWS JSON 1.0 with `awsQueryCompatible`
 * errors), SNS (awsQuery), EventBridge and Kinesis (JSON 1.1) and S3 (REST), each in the wire protocol the AWS
 * SDK v3 client speaks, so an unmodified client pointed at `url` works against it; and it can be made to fail in
 * the ways real AWS fails (throttling, 5xx, one batch entry rejected, a response lost after the send was
 * accepted, the endpoint unreachable).
 *
 * Not modelled: retention, dead-letter redrive, purge rate limits, ReceiveRequestAttemptId, permissions, tags.
 * test/dev/parity.test.ts runs the same scenarios here and on moto and holds both to AWS's documented behaviour.
 *
 * This module is the entry point (`outbox dev`, the demo, tests and the bench): startFakeSqs and the types
 * callers use. The parts, one concern each: server.ts (HTTP, routing, request faults); sqsService.ts (the SQS
 * actions), sqsQueue.ts (the queue model), sqsValidation.ts (what SQS accepts), sqsWire.ts (the JSON protocol);
 * sns.ts, eventBridge.ts, kinesis.ts, s3.ts with s3Checksums.ts (the other services); faults.ts (fault injection).
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
