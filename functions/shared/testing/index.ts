/** aws-outbox-relay/testing: records for testing consumers (docs/testing.md). Imports no AWS SDK. */
export {
  DEFAULT_TEST_QUEUE_ARN,
  type EnqueuedEventLike,
  type EventBridgeRecordOptions,
  eventBridgeRecordOf,
  type OutboxRowLike,
  type ReceivedSqsMessage,
  type SqsRecordOptions,
  sqsEventOf,
  sqsRecordFromMessage,
  sqsRecordOf,
} from "./sqsRecords.ts";
