/**
 * The Kinesis Data Streams part of the in-process endpoint: streams of shards, written by the relay's
 * destination and read as Lambda's event source reads them (kinesisEventSource.ts), in the protocol
 * `KinesisClient` speaks (AWS JSON 1.1, `X-Amz-Target: Kinesis_20131202.<Action>`, Data as base64;
 * @aws-sdk/client-kinesis's AwsJson1_1Protocol). server.ts routes those requests here, so the server's request
 * faults apply to Kinesis too.
 *
 * Modelled (Amazon Kinesis Data Streams API Reference, "CreateStream", "PutRecords", "GetShardIterator",
 * "GetRecords"; Developer Guide, "Terminology and concepts"): shards owning even ranges of the 128-bit hash key
 * space, a record's shard from the MD5 of its partition key (or its ExplicitHashKey), sequence numbers that grow
 * per shard, ≤ 500 records (ValidationException), a partition key of 1-256 characters, Data ≤ 1 MiB with its
 * key, ≤ 5 MiB per request (InvalidArgumentException), the stream by name or ARN (ResourceNotFoundException),
 * positional per-record results; iterators of every type, GetRecords with its Limit. An on-demand stream (no
 * ShardCount) starts with 4 shards, as on AWS. Not modelled: throughput limits, resharding, retention (records
 * stay until the endpoint closes), iterator expiry, encryption, consumers (enhanced fan-out).
 */

import { createHash } from "node:crypto";
import { ACCOUNT, REGION } from "./account.ts";
import { ServiceError } from "./serviceError.ts";

const MAX_RECORDS = 500;
const MAX_RECORD_BYTES = 1_048_576;
const MAX_REQUEST_BYTES = 5 * 1_048_576;
const ON_DEMAND_SHARDS = 4;
const MAX_GET_RECORDS = 10_000;
const HASH_SPACE = 2n ** 128n;

/** An error Kinesis answers a whole request with: `code` becomes the JSON 1.1 `__type`. */
export class KinesisError extends ServiceError {}

/** One accepted record, in arrival order. */
export interface StreamRecord {
  stream: string;
  shardId: string;
  partitionKey: string;
  sequenceNumber: string;
  data: Buffer;
  at: number;
}

interface Shard {
  id: string;
  start: bigint;
  end: bigint;
  records: StreamRecord[];
  /** Records cleared away before `records[0]`: iterators count from the shard's first record ever. */
  trimmed: number;
}

interface Stream {
  name: string;
  arn: string;
  mode: "PROVISIONED" | "ON_DEMAND";
  createdAt: number;
  shards: Shard[];
}

/** Where a shard iterator points: the number of the next record in its shard, counted from its first ever. */
interface Position {
  stream: string;
  shard: string;
  next: number;
}

export class KinesisService {
  readonly #streams = new Map<string, Stream>();
  #records: StreamRecord[] = [];
  #sequence = 0n;

  handle(action: string, input: Record<string, unknown>): unknown {
    switch (action) {
      case "CreateStream":
        this.#createStream(input);
        return {};
      case "DeleteStream":
        this.#streams.delete(this.#stream(input).name);
        return {};
      case "DescribeStream": {
        const stream = this.#stream(input);
        return {
          StreamDescription: {
            ...describe(stream),
            Shards: stream.shards.map(shardJson),
            HasMoreShards: false,
          },
        };
      }
      case "DescribeStreamSummary": {
        const stream = this.#stream(input);
        return {
          StreamDescriptionSummary: {
            ...describe(stream),
            OpenShardCount: stream.shards.length,
            ConsumerCount: 0,
          },
        };
      }
      case "ListShards":
        return { Shards: this.#stream(input).shards.map(shardJson) };
      case "PutRecord": {
        const stream = this.#stream(input);
        const [record] = this.#put(stream, [input]);
        return { ...record, EncryptionType: "NONE" };
      }
      case "PutRecords":
        return this.#putRecords(input);
      case "GetShardIterator":
        return { ShardIterator: this.#shardIterator(input) };
      case "GetRecords":
        return this.#getRecords(input);
      default:
        throw new KinesisError("UnknownOperationException", `Unknown action ${action}`);
    }
  }

  /** Every record accepted since the last clear(), in arrival order. */
  records(): StreamRecord[] {
    return [...this.#records];
  }

  /** Forgets the records put so far (the log and the shards' contents, as if trimmed); streams and iterators stay. */
  clear(): void {
    this.#records = [];
    for (const stream of this.#streams.values()) {
      for (const shard of stream.shards) {
        shard.trimmed += shard.records.length;
        shard.records = [];
      }
    }
  }

  #createStream(input: Record<string, unknown>): void {
    const name = input.StreamName;
    if (typeof name !== "string" || !/^[a-zA-Z0-9_.-]{1,128}$/.test(name)) {
      throw new KinesisError("ValidationException", "StreamName must match [a-zA-Z0-9_.-]{1,128}");
    }
    if (this.#streams.has(name)) {
      throw new KinesisError(
        "ResourceInUseException",
        `Stream ${name} under account ${ACCOUNT} already exists.`,
      );
    }
    const details = input.StreamModeDetails as { StreamMode?: string } | undefined;
    const count = input.ShardCount;
    const onDemand = details?.StreamMode === "ON_DEMAND" || count === undefined;
    if (!onDemand && (typeof count !== "number" || !Number.isInteger(count) || count < 1)) {
      throw new KinesisError("ValidationException", "ShardCount must be at least 1");
    }
    const shards = onDemand ? ON_DEMAND_SHARDS : (count as number);
    const step = HASH_SPACE / BigInt(shards);
    this.#streams.set(name, {
      name,
      arn: `arn:aws:kinesis:${REGION}:${ACCOUNT}:stream/${name}`,
      mode: onDemand ? "ON_DEMAND" : "PROVISIONED",
      createdAt: Date.now() / 1000,
      shards: Array.from({ length: shards }, (_, i) => ({
        id: `shardId-${String(i).padStart(12, "0")}`,
        start: BigInt(i) * step,
        end: i === shards - 1 ? HASH_SPACE - 1n : BigInt(i + 1) * step - 1n,
        records: [],
        trimmed: 0,
      })),
    });
  }

  #putRecords(input: Record<string, unknown>) {
    const stream = this.#stream(input);
    const records = Array.isArray(input.Records) ? (input.Records as Record<string, unknown>[]) : [];
    if (records.length === 0 || records.length > MAX_RECORDS) {
      throw new KinesisError(
        "ValidationException",
        `1 validation error detected: Value at 'records' failed to satisfy constraint: Member must have length between 1 and ${MAX_RECORDS}`,
      );
    }
    return { FailedRecordCount: 0, Records: this.#put(stream, records), EncryptionType: "NONE" };
  }

  /** Validates every record first (a bad one fails the request, nothing stored), then stores them in order. */
  #put(stream: Stream, records: Record<string, unknown>[]): { SequenceNumber: string; ShardId: string }[] {
    const decoded = records.map((record) => {
      const key = record.PartitionKey;
      if (typeof key !== "string" || key.length === 0 || key.length > 256) {
        throw new KinesisError("ValidationException", "PartitionKey must be 1-256 characters");
      }
      const data = Buffer.from(typeof record.Data === "string" ? record.Data : "", "base64");
      if (data.length + Buffer.byteLength(key) > MAX_RECORD_BYTES) {
        throw new KinesisError("ValidationException", "Record size exceeds 1 MB");
      }
      return { key, data, shard: shardFor(stream, key, record.ExplicitHashKey) };
    });
    const bytes = decoded.reduce((sum, { key, data }) => sum + data.length + Buffer.byteLength(key), 0);
    if (bytes > MAX_REQUEST_BYTES) {
      throw new KinesisError("InvalidArgumentException", "Records size exceeds 5 MB limit");
    }
    const at = Date.now();
    return decoded.map(({ key, data, shard }) => {
      // 56 digits like Kinesis's, growing with every record (so within each shard), compared as numbers.
      const sequenceNumber = `49${String(++this.#sequence).padStart(54, "0")}`;
      const record = { stream: stream.name, shardId: shard.id, partitionKey: key, sequenceNumber, data, at };
      shard.records.push(record);
      this.#records.push(record);
      return { SequenceNumber: sequenceNumber, ShardId: shard.id };
    });
  }

  #shardIterator(input: Record<string, unknown>): string {
    const stream = this.#stream(input);
    const shard = stream.shards.find((candidate) => candidate.id === input.ShardId);
    if (shard === undefined) {
      throw new KinesisError(
        "ResourceNotFoundException",
        `Shard ${String(input.ShardId)} in stream ${stream.name} under account ${ACCOUNT} does not exist`,
      );
    }
    const type = input.ShardIteratorType;
    const sequence = () => {
      const given = input.StartingSequenceNumber;
      if (typeof given !== "string" || !/^\d{1,128}$/.test(given)) {
        throw new KinesisError(
          "InvalidArgumentException",
          `StartingSequenceNumber is required for ${String(type)}`,
        );
      }
      return BigInt(given);
    };
    const firstIndex = (keep: (record: StreamRecord) => boolean) => {
      const index = shard.records.findIndex(keep);
      return index === -1 ? shard.records.length : index;
    };
    let next: number;
    switch (type) {
      case "TRIM_HORIZON":
        next = 0;
        break;
      case "LATEST":
        next = shard.records.length;
        break;
      case "AT_SEQUENCE_NUMBER": {
        const at = sequence();
        next = firstIndex((record) => BigInt(record.sequenceNumber) >= at);
        break;
      }
      case "AFTER_SEQUENCE_NUMBER": {
        const after = sequence();
        next = firstIndex((record) => BigInt(record.sequenceNumber) > after);
        break;
      }
      case "AT_TIMESTAMP": {
        const seconds = input.Timestamp;
        if (typeof seconds !== "number") {
          throw new KinesisError("InvalidArgumentException", "Timestamp is required for AT_TIMESTAMP");
        }
        next = firstIndex((record) => record.at >= seconds * 1000);
        break;
      }
      default:
        throw new KinesisError("ValidationException", `Invalid ShardIteratorType ${String(type)}`);
    }
    return iterator({ stream: stream.name, shard: shard.id, next: shard.trimmed + next });
  }

  #getRecords(input: Record<string, unknown>) {
    const limit = input.Limit ?? MAX_GET_RECORDS;
    if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > MAX_GET_RECORDS) {
      throw new KinesisError("ValidationException", `Limit must be between 1 and ${MAX_GET_RECORDS}`);
    }
    const position = readIterator(input.ShardIterator);
    const shard = this.#streams
      .get(position.stream)
      ?.shards.find((candidate) => candidate.id === position.shard);
    if (shard === undefined) {
      throw new KinesisError(
        "ResourceNotFoundException",
        `Shard ${position.shard} of stream ${position.stream} does not exist`,
      );
    }
    // An iterator into records cleared away reads on from the oldest left, as one past a trim horizon does.
    const from = Math.max(position.next - shard.trimmed, 0);
    const taken = shard.records.slice(from, from + limit);
    const next = shard.trimmed + from + taken.length;
    const newest = shard.records.at(-1);
    return {
      Records: taken.map((record) => ({
        SequenceNumber: record.sequenceNumber,
        ApproximateArrivalTimestamp: record.at / 1000,
        Data: record.data.toString("base64"),
        PartitionKey: record.partitionKey,
      })),
      NextShardIterator: iterator({ ...position, next }),
      MillisBehindLatest:
        from + taken.length >= shard.records.length || newest === undefined
          ? 0
          : Math.max(0, newest.at - (taken.at(-1)?.at ?? newest.at)),
    };
  }

  #stream(input: Record<string, unknown>): Stream {
    const arn = input.StreamARN;
    const prefix = `arn:aws:kinesis:${REGION}:${ACCOUNT}:stream/`;
    const name =
      typeof arn === "string" ? (arn.startsWith(prefix) ? arn.slice(prefix.length) : "") : input.StreamName;
    const stream = typeof name === "string" ? this.#streams.get(name) : undefined;
    if (stream === undefined) {
      throw new KinesisError(
        "ResourceNotFoundException",
        `Stream ${String(name ?? arn)} under account ${ACCOUNT} not found.`,
      );
    }
    return stream;
  }
}

/** The shard whose hash key range holds the MD5 of the partition key as a 128-bit integer (or the explicit key). */
function shardFor(stream: Stream, partitionKey: string, explicitHashKey: unknown): Shard {
  const hash =
    typeof explicitHashKey === "string" && /^\d{1,39}$/.test(explicitHashKey)
      ? BigInt(explicitHashKey)
      : BigInt(`0x${createHash("md5").update(partitionKey, "utf8").digest("hex")}`);
  if (hash >= HASH_SPACE)
    throw new KinesisError("InvalidArgumentException", "ExplicitHashKey is out of range");
  return stream.shards.find((shard) => hash >= shard.start && hash <= shard.end) as Shard;
}

function describe(stream: Stream) {
  return {
    StreamName: stream.name,
    StreamARN: stream.arn,
    StreamStatus: "ACTIVE",
    StreamModeDetails: { StreamMode: stream.mode },
    RetentionPeriodHours: 24,
    StreamCreationTimestamp: stream.createdAt,
    EnhancedMonitoring: [{ ShardLevelMetrics: [] }],
    EncryptionType: "NONE",
  };
}

function shardJson(shard: Shard) {
  return {
    ShardId: shard.id,
    HashKeyRange: { StartingHashKey: String(shard.start), EndingHashKey: String(shard.end) },
    SequenceNumberRange: { StartingSequenceNumber: shard.records[0]?.sequenceNumber ?? "49".padEnd(56, "0") },
  };
}

/** An opaque iterator, as Kinesis's are: where to read next, base64 so a client cannot mistake it for data. */
function iterator(position: Position): string {
  return Buffer.from(JSON.stringify(position)).toString("base64");
}

function readIterator(value: unknown): Position {
  try {
    const position = JSON.parse(Buffer.from(String(value), "base64").toString("utf8")) as Position;
    if (
      typeof position.stream === "string" &&
      typeof position.shard === "string" &&
      Number.isInteger(position.next)
    ) {
      return position;
    }
  } catch {
    // not base64 JSON: not an iterator this endpoint issued
  }
  throw new KinesisError("InvalidArgumentException", "Invalid ShardIterator");
}
