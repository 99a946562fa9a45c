import type { Context } from "aws-lambda";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";

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

/**
 * The environment of a relay Lambda run in a test: the local AWS endpoint's region and credentials, and bounds
 * short enough for a test's invocations; `settings` (the database, the destination, anything else) win.
 */
export function relayLambdaEnv(
  settings: { DATABASE_URL: string; AWS_ENDPOINT_URL: string } & Record<string, string>,
): Record<string, string> {
  return {
    AWS_REGION: LOCAL_AWS.region,
    AWS_ACCESS_KEY_ID: LOCAL_AWS.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: LOCAL_AWS.credentials.secretAccessKey,
    RELAY_BUDGET_MARGIN_MS: "300",
    RELAY_PUBLISH_TIMEOUT_MS: "500",
    RELAY_STATEMENT_TIMEOUT_MS: "200",
    POWERTOOLS_LOG_LEVEL: "WARN",
    ...settings,
  };
}
