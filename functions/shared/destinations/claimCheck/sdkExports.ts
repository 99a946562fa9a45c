// The S3 client of the claim check, loaded on first use (named re-exports keep the bundle to it: see
// ../sqs/sdkExports.ts).
export { S3Client } from "@aws-sdk/client-s3";
