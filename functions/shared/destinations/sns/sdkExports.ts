// What the relay uses of the SNS SDK, loaded through sdk.ts on first use (named re-exports keep the bundle to
// these: see ../sqs/sdkExports.ts).
export { GetTopicAttributesCommand, PublishBatchCommand, SNSClient } from "@aws-sdk/client-sns";
