/**
 * SQS's own limits (developer guide, "Amazon SQS message quotas"): 1 MiB per message since 2025 (the queue
 * attribute MaximumMessageSize still defaults to 262,144: infra sets it), and a SendMessageBatch of at most 10
 * entries and 1 MiB in all.
 */
export const SQS_MAX_MESSAGE_BYTES = 1_048_576;
export const SQS_MAX_BATCH_ENTRIES = 10;
export const SQS_MAX_BATCH_BYTES = 1_048_576;
