import { CreateQueueCommand } from "@aws-sdk/client-sqs";
import { Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import * as sqs from "aws-cdk-lib/aws-sqs";
import type { CloudFormationCustomResourceEvent } from "aws-lambda";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { databaseSourceFromEnv } from "../../functions/shared/db/connection.ts";
import { migrationsCustomResource } from "../../functions/shared/db/migrationsResource.ts";
import { ValidationError } from "../../functions/shared/outbox/errors.ts";
import type { Logger } from "../../functions/shared/util/logger.ts";
import { OutboxRelay } from "../../infra/outboxRelay.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { lambdaContext, relayLambdaEnv } from "../support/lambda.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { receiveAll, sqsClient } from "../support/sqs.ts";
import { importedNetwork, newApp } from "../support/template.ts";

/**
 * Issue 38's first "done when": a 300 KiB event, default options, for an imported queue of SQS's default size
 * (256 KiB), through what the construct synthesizes: its migrations custom resource's properties (run by the
 * migrate Lambda's own function against real Postgres) and its relay's environment (run by the relay Lambda's
 * handler against a real SQS endpoint). Before, the write API took it (1 MiB by default) and the relay
 * dead-lettered it on its first try; now it is refused at write time, naming the queue's limit, and what is
 * accepted is delivered.
 */
const db = useTestDatabase();
const sqsApi = sqsClient();
const KIB = 1024;
const silent: Logger = { info: () => {}, warn: () => {}, error: () => {} };
let queueUrl: string;

/** What the construct makes for an app that imports its queue by ARN and says nothing of its size. */
function synthesized() {
  const stack = new Stack(newApp(), "Orders", { env: { account: "123456789012", region: "eu-west-1" } });
  const { vpc, secret } = importedNetwork(stack);
  const queue = sqs.Queue.fromQueueArn(stack, "Orders", "arn:aws:sqs:eu-west-1:123456789012:orders.fifo");
  new OutboxRelay(stack, "Outbox", { database: { secret, vpc }, destination: queue });
  const template = Template.fromStack(stack);
  const [migrations] = Object.values(template.findResources("Custom::OutboxMigrations"));
  const relay = Object.values(template.findResources("AWS::Lambda::Function")).find(
    (fn) => fn.Properties.Environment?.Variables?.RELAY_MAX_MESSAGE_BYTES !== undefined,
  );
  return {
    migrationProperties: migrations?.Properties as Record<string, unknown>,
    relayEnv: relay?.Properties.Environment.Variables as Record<string, unknown>,
  };
}

/** CloudFormation hands a custom resource every scalar of its properties as a string. */
function asCloudFormationSends(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(asCloudFormationSends);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, asCloudFormationSends(v)]));
  }
  return typeof value === "number" || typeof value === "boolean" ? String(value) : value;
}

describe("the construct's limits reach the write API (issue 38)", () => {
  const { migrationProperties, relayEnv } = synthesized();

  beforeAll(async () => {
    // The imported queue, as SQS creates it by default: MaximumMessageSize 262,144.
    const { QueueUrl } = await sqsApi.send(
      new CreateQueueCommand({
        QueueName: `imported-${Date.now()}.fifo`,
        Attributes: { FifoQueue: "true", VisibilityTimeout: "60" },
      }),
    );
    queueUrl = QueueUrl as string;
    const url = new URL(db.directUrl);
    url.searchParams.set("sslmode", "disable");
    await migrationsCustomResource(
      {
        RequestType: "Create",
        ResourceType: "Custom::OutboxMigrations",
        LogicalResourceId: "OutboxMigrations",
        RequestId: "request-1",
        ResponseURL: "https://example.invalid/response",
        ServiceToken: "x",
        StackId: "arn:aws:cloudformation:eu-west-1:123456789012:stack/Orders/1",
        ResourceProperties: asCloudFormationSends(migrationProperties),
      } as CloudFormationCustomResourceEvent,
      { source: databaseSourceFromEnv({ DATABASE_URL: url.toString() }), location: {}, logger: silent },
    );
    vi.resetModules();
    Object.assign(
      process.env,
      relayLambdaEnv({
        DATABASE_URL: db.url,
        AWS_ENDPOINT_URL: inject("awsEndpoint"),
        // The construct's own limit for the queue; the queue's URL is the local endpoint's.
        RELAY_MAX_MESSAGE_BYTES: String(relayEnv.RELAY_MAX_MESSAGE_BYTES),
        OUTBOX_QUEUE_URL: queueUrl,
        RELAY_MODE: "drain",
        RELAY_PUBLISH_TIMEOUT_MS: "30000",
        RELAY_STATEMENT_TIMEOUT_MS: "5000",
      }),
    );
  });
  afterAll(() => {
    for (const name of ["OUTBOX_QUEUE_URL", "RELAY_MAX_MESSAGE_BYTES", "RELAY_MODE"])
      delete process.env[name];
    sqsApi.destroy();
  });

  it("synthesizes 262,144 for the relay and the limits row alike", () => {
    expect(relayEnv.RELAY_MAX_MESSAGE_BYTES).toBe("262144");
    expect(migrationProperties.Limits).toMatchObject({ MaxMessageBytes: 262_144, ClaimCheck: "false" });
  });

  it("refuses a 300 KiB event with default options at write time, and delivers what it accepts", async () => {
    const big = anEvent({ aggregateId: "order-1", payload: { blob: "x".repeat(300 * KIB) } });
    const failed = await enqueueCommitted(db.pool, big).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(ValidationError);
    expect((failed as Error).message).toMatch(
      /message would be \d+ bytes .*over the limit of 262144, sqs-fifo:orders\.fifo's limit/,
    );

    const fits = anEvent({ aggregateId: "order-1", payload: { blob: "x".repeat(250 * KIB) } });
    const { id } = await enqueueCommitted(db.pool, fits);
    const { handler } = await import("../../functions/relay/handler.ts");
    await handler({}, lambdaContext(60_000));

    const messages = await receiveAll(sqsApi, queueUrl, 1);
    expect(messages.map((message) => message.MessageAttributes?.outboxId?.StringValue)).toEqual([id]);
    const { rows } = await db.pool.query(
      "select count(*)::int as dead from outbox_events where dead_lettered_at is not null",
    );
    expect(rows[0].dead).toBe(0);
  });
});
