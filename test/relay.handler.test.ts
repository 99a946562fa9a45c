import type { Context, ScheduledEvent } from "aws-lambda";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { enqueue } from "../functions/shared/enqueue.ts";
import { LOCAL_AWS } from "../local/awsEndpoint.ts";
import { useTestDatabase } from "./support/db.ts";
import { anEvent } from "./support/factories.ts";
import { createFifoQueue, receiveAll, sqsClient } from "./support/sqs.ts";

const db = useTestDatabase();
const sqs = sqsClient();

const scheduledEvent: ScheduledEvent = {
  version: "0",
  id: "0b5d8a3c-1111-2222-3333-444455556666",
  "detail-type": "Scheduled Event",
  source: "aws.events",
  account: "123456789012",
  time: new Date().toISOString(),
  region: "us-east-1",
  resources: ["arn:aws:events:us-east-1:123456789012:rule/outbox-relay-schedule"],
  detail: {},
};

function lambdaContext(remainingMs: number): Context {
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

describe("relay Lambda handler", () => {
  let queueUrl: string;
  beforeAll(async () => {
    queueUrl = await createFifoQueue(sqs, "handler");
    Object.assign(process.env, {
      DATABASE_URL: db.url,
      OUTBOX_QUEUE_URL: queueUrl,
      AWS_ENDPOINT_URL: inject("awsEndpoint"),
      AWS_REGION: LOCAL_AWS.region,
      AWS_ACCESS_KEY_ID: LOCAL_AWS.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: LOCAL_AWS.credentials.secretAccessKey,
      RELAY_BUDGET_MARGIN_MS: "300",
      RELAY_PUBLISH_TIMEOUT_MS: "500",
      RELAY_STATEMENT_TIMEOUT_MS: "200",
      POWERTOOLS_LOG_LEVEL: "WARN",
    });
  });

  it("publishes what is pending when invoked by the schedule, and returns its summary before the deadline", async () => {
    const ids = (await enqueue(db.pool, [anEvent(), anEvent(), anEvent()])).map((row) => row.id);
    const { handler } = await import("../functions/relay/handler.ts");
    const context = lambdaContext(2_500);

    const summary = await handler(scheduledEvent, context);

    expect(summary).toMatchObject({ published: 3, failed: 0, stoppedBy: "deadline" });
    expect(context.getRemainingTimeInMillis()).toBeGreaterThan(0);
    const messages = await receiveAll(sqs, queueUrl, 3);
    expect(messages.map((message) => message.MessageAttributes?.outboxId?.StringValue).sort()).toEqual(
      ids.sort(),
    );
  });
});
