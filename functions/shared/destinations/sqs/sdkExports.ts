// What the relay uses of the SQS SDK, loaded through sdk.ts on first use. A module of named re-exports, not
// `import("@aws-sdk/client-sqs")`: esbuild keeps every export of a dynamically imported module, so importing the
// package itself put all its commands in the Lambda bundle (relay 1,195 KiB before the lazy loading, 1,640 after).
export { GetQueueAttributesCommand, SendMessageBatchCommand, SQSClient } from "@aws-sdk/client-sqs";
