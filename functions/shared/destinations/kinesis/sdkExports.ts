// The Kinesis client and the HTTP/1.1 handler it is given, loaded on first use (named re-exports keep the bundle
// to these: see ../sqs/sdkExports.ts).
export { KinesisClient } from "@aws-sdk/client-kinesis";
export { NodeHttpHandler } from "@smithy/node-http-handler";
