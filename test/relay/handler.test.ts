import { CreateQueueCommand } from "@aws-sdk/client-sqs";
import type { ScheduledEvent } from "aws-lambda";
import { beforeAll, describe, expect, inject, it, vi } from "vitest";
import { startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { lambdaContext, relayLambdaEnv } from "../support/lambda.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { createFifoQueue, receiveAll, sqsClient } from "../support/sqs.ts";
import { startStallingTcpProxy } from "../support/tcpProxy.ts";

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

describe("relay Lambda handler", () => {
  let queueUrl: string;
  beforeAll(async () => {
    queueUrl = await createFifoQueue(sqs, "handler");
    Object.assign(
      process.env,
      relayLambdaEnv({
        DATABASE_URL: db.url,
        OUTBOX_QUEUE_URL: queueUrl,
        AWS_ENDPOINT_URL: inject("awsEndpoint"),
      }),
    );
  });

  it("publishes what is pending when invoked by the schedule, and returns its summary before the deadline", async () => {
    const ids = (await enqueueCommitted(db.pool, [anEvent(), anEvent(), anEvent()])).map((row) => row.id);
    const { handler } = await import("../../functions/relay/handler.ts");
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

/** The handler reads its environment at cold start: a fresh module instance is a fresh Lambda container. */
async function coldStart(env: Record<string, string>) {
  vi.resetModules();
  Object.assign(process.env, env);
  return import("../../functions/relay/handler.ts");
}

async function pendingRows(db: { pool: { query(text: string): Promise<{ rows: { n: number }[] }> } }) {
  const { rows } = await db.pool.query(
    "select count(*)::int as n from outbox_events where processed_at is null and dead_lettered_at is null and attempts = 0",
  );
  return rows[0]?.n;
}

describe("relay Lambda handler: settings that cannot work fail the invocation", () => {
  it("fails when the time budget cannot fit one round, naming the settings and the minimum timeout", async () => {
    const queueUrl = await createFifoQueue(sqs, "budget");
    const { handler } = await coldStart({ OUTBOX_QUEUE_URL: queueUrl });
    await enqueueCommitted(db.pool, anEvent());

    // One round reserves 500 + 3 x 200 = 1,100 ms; 1,000 ms minus the 300 ms margin leaves 700.
    const invocation = handler(scheduledEvent, lambdaContext(1_000));

    // A fresh module instance has its own error classes: compare by name.
    await expect(invocation).rejects.toMatchObject({ name: "ConfigError" });
    await expect(invocation).rejects.toThrow(
      /RELAY_BUDGET_MARGIN_MS=300\) cannot fit one round, which reserves 1100 ms .*Lambda timeout to at least 2 s/,
    );
  });

  it("refuses a standard queue on its first invocation, before claiming anything", async () => {
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: `standard-${Date.now()}` }));
    const { handler } = await coldStart({ OUTBOX_QUEUE_URL: QueueUrl as string });
    await db.pool.query("delete from outbox_events");
    await enqueueCommitted(db.pool, anEvent());

    await expect(handler(scheduledEvent, lambdaContext(2_500))).rejects.toThrow(/is not a FIFO queue/);
    expect(await pendingRows(db)).toBe(1);
  });

  it("refuses a queue whose MaximumMessageSize is below RELAY_MAX_MESSAGE_BYTES, and a queue that does not exist", async () => {
    const { QueueUrl } = await sqs.send(
      new CreateQueueCommand({
        QueueName: `small-${Date.now()}.fifo`,
        Attributes: { FifoQueue: "true", MaximumMessageSize: "262144" },
      }),
    );
    const small = await coldStart({ OUTBOX_QUEUE_URL: QueueUrl as string });
    await expect(small.handler(scheduledEvent, lambdaContext(2_500))).rejects.toThrow(
      /accepts messages up to 262144 bytes but the relay may send 1048576: set the queue's MaximumMessageSize/,
    );

    const missing = await coldStart({
      OUTBOX_QUEUE_URL: `${new URL(QueueUrl as string).origin}/123456789012/nope.fifo`,
    });
    await expect(missing.handler(scheduledEvent, lambdaContext(2_500))).rejects.toThrow(
      /queue .*nope\.fifo does not exist/,
    );
  });
});

describe("relay Lambda handler: the queue check", () => {
  it("fails while SQS cannot be reached, and checks again on the next invocation", async () => {
    const fake = await startFakeSqs();
    try {
      const queueUrl = await createFifoQueue(sqsClient(fake.url), "unreachable");
      const { handler } = await coldStart({ OUTBOX_QUEUE_URL: queueUrl, AWS_ENDPOINT_URL: fake.url });
      await db.pool.query("delete from outbox_events");
      await enqueueCommitted(db.pool, anEvent());
      fake.down("reset");

      const first = handler(scheduledEvent, lambdaContext(2_500));
      await expect(first).rejects.toMatchObject({ name: "QueueCheckError" });
      await expect(first).rejects.toThrow(/cannot reach SQS at http:\/\/127\.0\.0\.1:\d+/);
      fake.up();
      const second = await handler(scheduledEvent, lambdaContext(2_500));

      expect(second.published).toBe(1);
    } finally {
      process.env.AWS_ENDPOINT_URL = inject("awsEndpoint");
      await fake.close();
    }
  });
});

describe("relay Lambda handler: an invocation that made no progress fails", () => {
  it("fails, naming the cause, when every claimed event failed to publish", async () => {
    const fake = await startFakeSqs();
    try {
      const queueUrl = await createFifoQueue(sqsClient(fake.url), "no-progress");
      fake.setFaults({
        failRequests: (action) =>
          action === "SendMessageBatch"
            ? { code: "KmsDisabled", status: 400, message: "key disabled" }
            : false,
      });
      const { handler } = await coldStart({ OUTBOX_QUEUE_URL: queueUrl, AWS_ENDPOINT_URL: fake.url });
      await db.pool.query("delete from outbox_events");
      await enqueueCommitted(db.pool, [anEvent(), anEvent()]);

      const invocation = handler(scheduledEvent, lambdaContext(2_500));

      await expect(invocation).rejects.toMatchObject({ name: "NoProgressError" });
      await expect(invocation).rejects.toThrow(
        /publish attempt\(s\) failed and no event was published; last publish error: .*KmsDisabled/,
      );
    } finally {
      process.env.AWS_ENDPOINT_URL = inject("awsEndpoint");
      await fake.close();
    }
  });
});

describe("relay Lambda handler: SQS connections", () => {
  it("opens a socket per request in flight: RELAY_CONCURRENCY x RELAY_PARALLEL_ROUNDS", async () => {
    const fake = await startFakeSqs();
    const proxy = await startStallingTcpProxy(Number(new URL(fake.url).port));
    try {
      const endpoint = `http://127.0.0.1:${proxy.port}`;
      // The SDK sends to the queue URL's host: make that the proxy, which counts the connections.
      const queueUrl = (await createFifoQueue(sqsClient(fake.url), "sockets")).replace(fake.url, endpoint);
      // Slow enough that both rounds' requests are in flight together.
      fake.setFaults({ latencyMs: (action) => (action === "SendMessageBatch" ? 400 : 0) });
      const { handler } = await coldStart({
        OUTBOX_QUEUE_URL: queueUrl,
        AWS_ENDPOINT_URL: endpoint,
        RELAY_CONCURRENCY: "2",
        RELAY_PARALLEL_ROUNDS: "2",
        RELAY_BATCH_SIZE: "20",
        RELAY_MODE: "drain",
        RELAY_PUBLISH_TIMEOUT_MS: "3000",
      });
      await db.pool.query("delete from outbox_events");
      await enqueueCommitted(
        db.pool,
        Array.from({ length: 40 }, () => anEvent()),
      );

      const summary = await handler(scheduledEvent, lambdaContext(10_000));

      expect(summary.published).toBe(40);
      expect(proxy.connections).toBe(4);
    } finally {
      process.env.AWS_ENDPOINT_URL = inject("awsEndpoint");
      for (const name of ["RELAY_CONCURRENCY", "RELAY_PARALLEL_ROUNDS", "RELAY_BATCH_SIZE", "RELAY_MODE"])
        delete process.env[name];
      process.env.RELAY_PUBLISH_TIMEOUT_MS = "500";
      await proxy.close();
      await fake.close();
    }
  });
});
