import type { Context } from "aws-lambda";

/** A Lambda context whose remaining time runs out `remainingMs` from now, as the runtime's does. */
export function lambdaContext(remainingMs: number): Context {
  const deadline = Date.now() + remainingMs;
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName: "outbox-relay",
    functionVersion: "$LATEST",
    invokedFunctionArn: "arn:aws:lambda:us-east-1:123456789012:function:outbox-relay",
    memoryLimitInMB: "512",
    awsRequestId: "c6af9ac6-7b61-11e6-9a41-93e812345678",
    logGroupName: "/aws/lambda/outbox-relay",
    logStreamName: "2026/11/29/[$LATEST]abcdef",
    getRemainingTimeInMillis: () => deadline - Date.now(),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}
