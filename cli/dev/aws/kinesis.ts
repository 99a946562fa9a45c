/**
 * The Kinesis Data Streams half of the in-process endpoint, as small as the relay's Kinesis destination needs:
 * CreateStream and PutRecords, in the protocol `KinesisClient` speaks (AWS JSON 1.1, `X-Amz-Target:
 * Kinesis_20131202.<Action>`, Data as base64; @aws-sdk/client-kinesis's AwsJson1_1Protocol). server.ts routes
 * those requests here, so the server's request faults apply to Kinesis too.
 *
 * Modelled (Amazon Kinesis Data Streams API Reference, "PutRecords"): ≤ 500 records (ValidationException), a
 * partition key of 1-256 characters, Data ≤ 1 MiB with its key, ≤ 5 MiB per request (InvalidArgumentException),
 * the stream by name or ARN (ResourceNotFoundException), positional per-record results with a sequence number
 * that grows per stream. Not modelled: shards and their throughput limits, reading, encryption.
 */

import { ACCOUNT, REGION } from "./account.ts";
import { ServiceError } from "./serviceError.ts";

const MAX_RECORDS = 500;
const MAX_RECORD_BYTES = 1_048_576;
const MAX_REQUEST_BYTES = 5 * 1_048_576;

/** An error Kinesis answers a whole request with: `code` becomes the JSON 1.1 `__type`. */
export class KinesisError extends ServiceError {}

/** One accepted record, in arrival order. */
export interface StreamRecord {
  stream: string;
  partitionKey: string;
  sequenceNumber: string;
  data: Buffer;
  at: number;
}

export class KinesisService {
  readonly #streams = new Set<string>();
  #records: StreamRecord[] = [];
  #sequence = 0n;

  handle(action: string, input: Record<string, unknown>): unknown {
    switch (action) {
      case "CreateStream": {
        const name = input.StreamName;
        if (typeof name !== "string" || !/^[a-zA-Z0-9_.-]{1,128}$/.test(name)) {
          throw new KinesisError("ValidationException", "StreamName must match [a-zA-Z0-9_.-]{1,128}");
        }
        this.#streams.add(name);
        return {};
      }
      case "PutRecords":
        return this.#putRecords(input);
      default:
        throw new KinesisError("UnknownOperationException", `Unknown action ${action}`);
    }
  }

  records(): StreamRecord[] {
    return [...this.#records];
  }

  clear(): void {
    this.#records = [];
  }

  #putRecords(input: Record<string, unknown>) {
    const stream = this.#streamOf(input);
    const records = Array.isArray(input.Records) ? (input.Records as Record<string, unknown>[]) : [];
    if (records.length === 0 || records.length > MAX_RECORDS) {
      throw new KinesisError(
        "ValidationException",
        `1 validation error detected: Value at 'records' failed to satisfy constraint: Member must have length between 1 and ${MAX_RECORDS}`,
      );
    }
    const decoded = records.map((record) => {
      const key = record.PartitionKey;
      if (typeof key !== "string" || key.length === 0 || key.length > 256) {
        throw new KinesisError("ValidationException", "PartitionKey must be 1-256 characters");
      }
      const data = Buffer.from(typeof record.Data === "string" ? record.Data : "", "base64");
      if (data.length + Buffer.byteLength(key) > MAX_RECORD_BYTES) {
        throw new KinesisError("ValidationException", "Record size exceeds 1 MB");
      }
      return { key, data };
    });
    const bytes = decoded.reduce((sum, { key, data }) => sum + data.length + Buffer.byteLength(key), 0);
    if (bytes > MAX_REQUEST_BYTES) {
      throw new KinesisError("InvalidArgumentException", "Records size exceeds 5 MB limit");
    }
    const at = Date.now();
    return {
      FailedRecordCount: 0,
      Records: decoded.map(({ key, data }) => {
        const sequenceNumber = String(++this.#sequence).padStart(56, "4");
        this.#records.push({ stream, partitionKey: key, sequenceNumber, data, at });
        return { SequenceNumber: sequenceNumber, ShardId: "shardId-000000000000" };
      }),
    };
  }

  #streamOf(input: Record<string, unknown>): string {
    const arn = input.StreamARN;
    const prefix = `arn:aws:kinesis:${REGION}:${ACCOUNT}:stream/`;
    const name =
      typeof arn === "string" ? (arn.startsWith(prefix) ? arn.slice(prefix.length) : "") : input.StreamName;
    if (typeof name !== "string" || !this.#streams.has(name)) {
      throw new KinesisError(
        "ResourceNotFoundException",
        `Stream ${String(name ?? arn)} under account ${ACCOUNT} not found.`,
      );
    }
    return name;
  }
}
