/**
 * What Lambda's Kinesis event source mapping does for a function, done in-process so the demo runs an inbox
 * handler exactly as Lambda would call it: read each shard from its start (TRIM_HORIZON) with GetShardIterator
 * and GetRecords, hand a shard's records over as one Kinesis event in sequence-number order, and with
 * `ReportBatchItemFailures` resume the shard from the lowest sequence number the handler reported failed
 * (AT_SEQUENCE_NUMBER), so that record and everything after it come again; records of other keys after it are
 * then duplicates the inbox skips. (AWS Lambda Developer Guide, "Using Lambda with Kinesis Data Streams",
 * "Implementing partial batch responses".)
 *
 * Not modelled: retry limits, bisecting a batch, on-failure destinations, enhanced fan-out, resharding.
 */
import {
  DescribeStreamCommand,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type KinesisClient,
  type _Record as StreamRecord,
} from "@aws-sdk/client-kinesis";
import type { InboxStreamHandler, KinesisEvent } from "../../../functions/shared/consumer/index.ts";

export interface StreamPollResult {
  received: number;
  failed: number;
}

export class KinesisEventSource {
  readonly #kinesis: KinesisClient;
  readonly #streamName: string;
  readonly #streamArn: string;
  readonly #batchSize: number;
  /** Where each shard's next read starts; undefined until the shards are listed. */
  #iterators: Map<string, string> | undefined;

  constructor(kinesis: KinesisClient, stream: { streamName: string; streamArn: string }, batchSize = 100) {
    this.#kinesis = kinesis;
    this.#streamName = stream.streamName;
    this.#streamArn = stream.streamArn;
    this.#batchSize = batchSize;
  }

  /** One GetRecords per shard and one handler call per shard that had records. */
  async pollOnce(handler: InboxStreamHandler, signal?: AbortSignal): Promise<StreamPollResult> {
    const options = signal === undefined ? {} : { abortSignal: signal };
    this.#iterators ??= await this.#shardStarts(options);
    const result = { received: 0, failed: 0 };
    for (const [shardId, iterator] of this.#iterators) {
      const { Records: records = [], NextShardIterator: next } = await this.#kinesis.send(
        new GetRecordsCommand({ ShardIterator: iterator, Limit: this.#batchSize }),
        options,
      );
      if (records.length === 0) {
        if (next !== undefined) this.#iterators.set(shardId, next);
        continue;
      }
      const response = await handler(this.#event(records));
      result.received += records.length;
      result.failed += response.batchItemFailures.length;
      const failed = response.batchItemFailures.map((failure) => BigInt(failure.itemIdentifier));
      if (failed.length === 0) {
        if (next !== undefined) this.#iterators.set(shardId, next);
        continue;
      }
      // Sequence numbers are decimal strings of up to 128 bits that grow per shard: compared as numbers.
      let lowest = failed[0] as bigint;
      for (const sequence of failed) if (sequence < lowest) lowest = sequence;
      this.#iterators.set(
        shardId,
        await this.#iterator(shardId, "AT_SEQUENCE_NUMBER", String(lowest), options),
      );
    }
    return result;
  }

  async #shardStarts(options: { abortSignal?: AbortSignal }): Promise<Map<string, string>> {
    const { StreamDescription } = await this.#kinesis.send(
      new DescribeStreamCommand({ StreamName: this.#streamName }),
      options,
    );
    const starts = new Map<string, string>();
    for (const shard of StreamDescription?.Shards ?? []) {
      const id = shard.ShardId as string;
      starts.set(id, await this.#iterator(id, "TRIM_HORIZON", undefined, options));
    }
    return starts;
  }

  async #iterator(
    shardId: string,
    type: "TRIM_HORIZON" | "AT_SEQUENCE_NUMBER",
    sequenceNumber: string | undefined,
    options: { abortSignal?: AbortSignal },
  ): Promise<string> {
    const { ShardIterator } = await this.#kinesis.send(
      new GetShardIteratorCommand({
        StreamName: this.#streamName,
        ShardId: shardId,
        ShardIteratorType: type,
        ...(sequenceNumber === undefined ? {} : { StartingSequenceNumber: sequenceNumber }),
      }),
      options,
    );
    if (ShardIterator === undefined) throw new Error(`GetShardIterator returned no iterator for ${shardId}`);
    return ShardIterator;
  }

  /** The event Lambda builds from a shard's records (the field names of the Lambda docs; data as base64). */
  #event(records: StreamRecord[]): KinesisEvent {
    return {
      Records: records.map((record) => ({
        kinesis: {
          partitionKey: record.PartitionKey ?? "",
          sequenceNumber: record.SequenceNumber ?? "",
          data: Buffer.from(record.Data ?? new Uint8Array()).toString("base64"),
        },
        eventSource: "aws:kinesis",
        eventSourceARN: this.#streamArn,
      })),
    };
  }
}
