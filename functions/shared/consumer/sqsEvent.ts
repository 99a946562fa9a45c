/**
 * The shape of the SQS event Lambda hands to a function, written out here (a structural subset of
 * `@types/aws-lambda`'s SQSEvent) so that the package's published types need no `@types/aws-lambda`.
 * `aws-lambda`'s SQSEvent and SQSRecord are assignable to these, and a created handler is an `SQSHandler`
 * (test/consumer/types.ts, compiled by `npm run typecheck`, keeps it so). No index signature on `attributes`:
 * an interface without one (aws-lambda's SQSRecordAttributes) is not assignable to a type that has one.
 */
export interface SqsMessageAttribute {
  stringValue?: string | undefined;
  binaryValue?: string | undefined;
  dataType: string;
}

export interface SqsRecord {
  messageId: string;
  receiptHandle: string;
  body: string;
  attributes: {
    ApproximateReceiveCount: string;
    SentTimestamp: string;
    AWSTraceHeader?: string | undefined;
    SequenceNumber?: string | undefined;
    MessageGroupId?: string | undefined;
    MessageDeduplicationId?: string | undefined;
    SenderId?: string | undefined;
    ApproximateFirstReceiveTimestamp?: string | undefined;
    DeadLetterQueueSourceArn?: string | undefined;
  };
  messageAttributes: Record<string, SqsMessageAttribute>;
  eventSource: string;
  eventSourceARN: string;
  awsRegion: string;
  md5OfBody?: string;
}

export interface SqsEvent {
  Records: SqsRecord[];
}

/** What `ReportBatchItemFailures` expects back: the ids of the messages to redeliver. */
export interface SqsBatchResponse {
  batchItemFailures: { itemIdentifier: string }[];
}

/** The part of the Lambda context the inbox reads; the real Context fits. */
export interface LambdaContextLike {
  awsRequestId?: string;
  getRemainingTimeInMillis?(): number;
}
