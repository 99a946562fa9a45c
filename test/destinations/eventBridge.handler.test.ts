import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { useTestDatabase } from "../support/db.ts";
import { createBusToQueue, eventBridgeClient } from "../support/eventBridge.ts";
import { anEvent } from "../support/factories.ts";
import { lambdaContext, relayLambdaEnv } from "../support/lambda.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { receiveAll, sqsClient } from "../support/sqs.ts";

const db = useTestDatabase();
const events = eventBridgeClient();
const sqs = sqsClient();
const SOURCE = "com.example.handler";

describe("relay Lambda handler with OUTBOX_EVENT_BUS_NAME", () => {
  let queueUrl: string;
  beforeAll(async () => {
    const route = await createBusToQueue(events, sqs, SOURCE, "handler-bus");
    queueUrl = route.queueUrl;
    Object.assign(
      process.env,
      relayLambdaEnv({
        DATABASE_URL: db.url,
        OUTBOX_EVENT_BUS_NAME: `arn:aws:events:${LOCAL_AWS.region}:000000000000:event-bus/${route.busName}`,
        OUTBOX_EVENT_SOURCE: SOURCE,
        AWS_ENDPOINT_URL: inject("awsEndpoint"),
        // moto routes an event to an SQS target in ~0.6 s (10 events: 5.7-6.4 s measured).
        RELAY_PUBLISH_TIMEOUT_MS: "30000",
        RELAY_MODE: "drain",
      }),
    );
    delete process.env.OUTBOX_QUEUE_URL;
  });
  afterAll(() => {
    events.destroy();
    sqs.destroy();
  });

  it("publishes what is pending to the bus named by its ARN, with the configured source", async () => {
    const ids = (await enqueueCommitted(db.pool, [anEvent(), anEvent(), anEvent()])).map((row) => row.id);
    const { handler } = await import("../../functions/relay/handler.ts");

    const summary = await handler({}, lambdaContext(90_000));

    expect(summary).toMatchObject({ published: 3, failed: 0 });
    const received = (await receiveAll(sqs, queueUrl, 3)).map((message) => JSON.parse(message.Body ?? ""));
    expect(received.map((event) => event.source)).toEqual([SOURCE, SOURCE, SOURCE]);
    expect(received.map((event) => event.detail.outboxId).sort()).toEqual(ids.sort());
  });
});
