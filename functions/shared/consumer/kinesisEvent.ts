/**
 * The shape of the Kinesis event Lambda hands to a function (a structural subset of `@types/aws-lambda`'s
 * KinesisStreamEvent, written out as sqsEvent.ts is, so the package's types need no `@types/aws-lambda`). One
 * invocation's records come from one shard, in sequence-number order (Lambda, "Using Lambda with Kinesis").
 */
export interface KinesisRecord {
  kinesis: {
    partitionKey: string;
    /** Grows per shard in write order; the checkpoint Lambda resumes from, and what batchItemFailures names. */
    sequenceNumber: string;
    /** The record's bytes, base64. */
    data: string;
  };
  eventSource: string;
  /** The stream (or its consumer's) ARN. */
  eventSourceARN: string;
}

export interface KinesisEvent {
  Records: KinesisRecord[];
}
