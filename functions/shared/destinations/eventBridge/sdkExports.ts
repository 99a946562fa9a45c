// What the relay uses of the EventBridge SDK, loaded on first use (named re-exports keep the bundle to these: see
// ../sqs/sdkExports.ts).
export { EventBridgeClient, PutEventsCommand } from "@aws-sdk/client-eventbridge";
