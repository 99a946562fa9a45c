/**
 * What `outbox dev` needs of Kinesis beyond the in-process endpoint's CreateStream and PutRecords
 * (cli/dev/aws/fakeKinesis.ts, which records what was put and serves no reads): DescribeStreamSummary (the
 * relay's stream check), DescribeStream, GetShardIterator and GetRecords, which Lambda's Kinesis event source
 * (cli/dev/aws/kinesisEventSource.ts) calls. One shard per stream, as the fake keeps one sequence per stream.
 * Iterators are positions in the stream's records (Amazon Kinesis Data Streams API Reference, "GetShardIterator":
 * TRIM_HORIZON, LATEST, AT_ / AFTER_SEQUENCE_NUMBER).
 */
import { ACCOUNT, REGION } from "../aws/account.ts";
import { FakeKinesis, KinesisError, type StreamRecord } from "../aws/fakeKinesis.ts";

const SHARD_ID = "shardId-000000000000";
const MAX_RECORDS_PER_READ = 10_000;

export class ReadableKinesis extends FakeKinesis {
  readonly #created = new Set<string>();

  override handle(action: string, input: Record<string, unknown>): unknown {
    switch (action) {
      case "CreateStream": {
        const answer = super.handle(action, input);
        this.#created.add(input.StreamName as string);
        return answer;
      }
      case "DescribeStreamSummary": {
        const name = this.#stream(input);
        return {
          StreamDescriptionSummary: {
            StreamName: name,
            StreamARN: arnOf(name),
            StreamStatus: "ACTIVE",
            StreamModeDetails: { StreamMode: "PROVISIONED" },
            RetentionPeriodHours: 24,
            StreamCreationTimestamp: 0,
            EnhancedMonitoring: [],
            OpenShardCount: 1,
          },
        };
      }
      case "DescribeStream": {
        const name = this.#stream(input);
        return {
          StreamDescription: {
            StreamName: name,
            StreamARN: arnOf(name),
            StreamStatus: "ACTIVE",
            Shards: [
              {
                ShardId: SHARD_ID,
                HashKeyRange: { StartingHashKey: "0", EndingHashKey: String(2n ** 128n - 1n) },
                SequenceNumberRange: { StartingSequenceNumber: "0" },
              },
            ],
            HasMoreShards: false,
            RetentionPeriodHours: 24,
            StreamCreationTimestamp: 0,
            EnhancedMonitoring: [],
          },
        };
      }
      case "GetShardIterator":
        return { ShardIterator: this.#iterator(input) };
      case "GetRecords":
        return this.#getRecords(input);
      default:
        return super.handle(action, input);
    }
  }

  #stream(input: Record<string, unknown>): string {
    const arn = input.StreamARN;
    const name = typeof arn === "string" ? arn.slice(arn.lastIndexOf("/") + 1) : input.StreamName;
    if (typeof name !== "string" || !this.#created.has(name)) {
      throw new KinesisError(
        "ResourceNotFoundException",
        `Stream ${String(name)} under account ${ACCOUNT} not found.`,
      );
    }
    return name;
  }

  #recordsOf(stream: string): StreamRecord[] {
    return this.records().filter((record) => record.stream === stream);
  }

  #iterator(input: Record<string, unknown>): string {
    const stream = this.#stream(input);
    const records = this.#recordsOf(stream);
    const sequence =
      typeof input.StartingSequenceNumber === "string" ? BigInt(input.StartingSequenceNumber) : 0n;
    let position: number;
    switch (input.ShardIteratorType) {
      case "TRIM_HORIZON":
        position = 0;
        break;
      case "LATEST":
        position = records.length;
        break;
      case "AT_SEQUENCE_NUMBER":
        position = indexFrom(records, (n) => n >= sequence);
        break;
      case "AFTER_SEQUENCE_NUMBER":
        position = indexFrom(records, (n) => n > sequence);
        break;
      default:
        throw new KinesisError(
          "InvalidArgumentException",
          `ShardIteratorType ${String(input.ShardIteratorType)}`,
        );
    }
    return encode(stream, position);
  }

  #getRecords(input: Record<string, unknown>) {
    const { stream, position } = decode(input.ShardIterator);
    this.#stream({ StreamName: stream });
    const limit =
      typeof input.Limit === "number" ? Math.min(input.Limit, MAX_RECORDS_PER_READ) : MAX_RECORDS_PER_READ;
    const records = this.#recordsOf(stream);
    const read = records.slice(position, position + limit);
    return {
      Records: read.map((record) => ({
        SequenceNumber: record.sequenceNumber,
        ApproximateArrivalTimestamp: record.at / 1000,
        Data: record.data.toString("base64"),
        PartitionKey: record.partitionKey,
      })),
      NextShardIterator: encode(stream, position + read.length),
      MillisBehindLatest: 0,
    };
  }
}

const arnOf = (name: string) => `arn:aws:kinesis:${REGION}:${ACCOUNT}:stream/${name}`;

function indexFrom(records: StreamRecord[], from: (sequence: bigint) => boolean): number {
  const index = records.findIndex((record) => from(BigInt(record.sequenceNumber)));
  return index === -1 ? records.length : index;
}

function encode(stream: string, position: number): string {
  return Buffer.from(JSON.stringify({ stream, position })).toString("base64");
}

function decode(iterator: unknown): { stream: string; position: number } {
  try {
    const parsed = JSON.parse(Buffer.from(String(iterator), "base64").toString("utf8"));
    if (typeof parsed.stream === "string" && Number.isInteger(parsed.position)) return parsed;
  } catch {
    // answered below
  }
  throw new KinesisError("InvalidArgumentException", "Invalid ShardIterator");
}
