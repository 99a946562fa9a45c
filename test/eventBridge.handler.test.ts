import type { Context } from "aws-lambda";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { enqueue } from "../functions/shared/enqueue.ts";
import { LOCAL_AWS } from "../local/awsEndpoint.ts";
import { useTestDatabase } from "./support/db.ts";
import { createBusToQueue, eventBridgeClient } from "./support/eventBridge.ts";
import { anEvent } from "./support/factories.ts";
import { receiveAll, sqsClient } from "./support/sqs.ts";

const db = useTestDatabase();
const events = eventBridgeClient();
const sqs = sqsClient();
const SOURCE = "com.example.handler";

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
    logStreamName: "2026/12/01/[$LATEST]abcdef",
    getRemainingTimeInMillis: () => deadline - Date.now(),
    done: () => {},
    fail: () => {},
    succeed: () => {},
  };
}

describe("relay Lambda handler with OUTBOX_EVENT_BUS_NAME", () => {
  let queueUrl: string;
  beforeAll(async () => {
    const route = await createBusToQueue(events, sqs, SOURCE, "handler-bus");
    queueUrl = route.queueUrl;
    Object.assign(process.env, {
      DATABASE_URL: db.url,
      OUTBOX_EVENT_BUS_NAME: `arn:aws:events:${LOCAL_AWS.region}:000000000000:event-bus/${route.busName}`,
      OUTBOX_EVENT_SOURCE: SOURCE,
      AWS_ENDPOINT_URL: inject("awsEndpoint"),
      AWS_REGION: LOCAL_AWS.region,
      AWS_ACCESS_KEY_ID: LOCAL_AWS.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: LOCAL_AWS.credentials.secretAccessKey,
      RELAY_BUDGET_MARGIN_MS: "300",
      // moto's first PutEvents through a rule takes seconds (its events backend loads lazily).
      RELAY_PUBLISH_TIMEOUT_MS: "10000",
      RELAY_MODE: "drain",
      RELAY_STATEMENT_TIMEOUT_MS: "200",
      POWERTOOLS_LOG_LEVEL: "WARN",
    });
    delete process.env.OUTBOX_QUEUE_URL;
  });
  afterAll(() => {
    events.destroy();
    sqs.destroy();
  });

  it("publishes what is pending to the bus named by its ARN, with the configured source", async () => {
    const ids = (await enqueue(db.pool, [anEvent(), anEvent(), anEvent()])).map((row) => row.id);
    const { handler } = await import("../functions/relay/handler.ts");

    const summary = await handler({}, lambdaContext(30_000));

    expect(summary).toMatchObject({ published: 3, failed: 0 });
    const received = (await receiveAll(sqs, queueUrl, 3)).map((message) => JSON.parse(message.Body ?? ""));
    expect(received.map((event) => event.source)).toEqual([SOURCE, SOURCE, SOURCE]);
    expect(received.map((event) => event.detail.outboxId).sort()).toEqual(ids.sort());
  });
});
