/** aws-outbox-relay/testing: records for testing consumers (docs/testing.md). Imports no AWS SDK. */
export {
  DEFAULT_TEST_QUEUE_ARN,
  DEFAULT_TEST_SENDER_ID,
  type EnqueuedEventLike,
  type EventBridgeRecordOptions,
  eventBridgeRecordOf,
  type LambdaSqsEvent,
  type LambdaSqsRecord,
  type OutboxRowLike,
  type ReceivedSqsMessage,
  type SqsRecordOptions,
  sqsEventOf,
  sqsRecordFromMessage,
  sqsRecordOf,
} from "./sqsRecords.ts";
