import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { CreateSecretCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { Duration, Stack } from "aws-cdk-lib";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import * as sqs from "aws-cdk-lib/aws-sqs";
import { afterAll, describe, expect, inject, it } from "vitest";
import { migrateInbox } from "../../functions/shared/consumer/index.ts";
import { OutboxConsumer } from "../../infra/consumer.ts";
import { PROJECT_ROOT } from "../../infra/outboxRelay.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { relayRecord } from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";
import { newApp } from "../support/template.ts";

/**
 * Issue 29, item 3: the consumer of docs/consumer.md (test/fixtures/consumerHandler.ts), bundled by the construct, run with
 * the environment the template gives its function, against a real Postgres whose credentials are in a moto secret.
 * Deploys nothing. On the old construct the function had no DATABASE_SECRET_ARN and failed at cold start.
 */
const db = useTestDatabase();
const workDir = mkdtempSync(join(tmpdir(), "outbox-consumer-"));
afterAll(() => rmSync(workDir, { recursive: true, force: true }));

describe("OutboxConsumer's bundled function with the template's environment", () => {
  it("applies a message with the handler of docs/consumer.md", async () => {
    await migrateInbox(db.pool, { schema: "billing" });
    await db.pool.query("create table invoices (order_id text primary key, total_cents integer not null)");
    const url = new URL(db.url);
    const secrets = new SecretsManagerClient({ ...LOCAL_AWS, endpoint: inject("awsEndpoint") });
    const { ARN } = await secrets.send(
      new CreateSecretCommand({
        Name: `billing/db/${Date.now()}`,
        SecretString: JSON.stringify({
          engine: "postgres",
          host: url.hostname,
          port: Number(url.port),
          username: decodeURIComponent(url.username),
          password: decodeURIComponent(url.password),
        }),
      }),
    );
    secrets.destroy();

    const outdir = join(workDir, "cdk.out");
    const app = newApp({ "aws:cdk:bundling-stacks": ["**"], "aws:cdk:enable-asset-metadata": true }, outdir);
    const stack = new Stack(app, "Billing", { env: { account: "123456789012", region: "us-east-1" } });
    const consumer = new OutboxConsumer(stack, "Consumer", {
      queue: new sqs.Queue(stack, "Queue", { enforceSSL: true, visibilityTimeout: Duration.minutes(3) }),
      entry: join(PROJECT_ROOT, "test/fixtures/consumerHandler.ts"),
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: join(PROJECT_ROOT, "package-lock.json"),
      databaseSecret: secretsmanager.Secret.fromSecretCompleteArn(stack, "Db", ARN as string),
      databaseName: url.pathname.slice(1),
    });
    const assembly = app.synth();
    const template = assembly.getStackByName("Billing").template as {
      Resources: Record<
        string,
        { Type: string; Properties: Record<string, unknown>; Metadata?: Record<string, string> }
      >;
    };
    // The AWS SDK is left out of the bundle, as the Lambda runtime provides it: this package's stands in for it.
    symlinkSync(join(PROJECT_ROOT, "node_modules"), join(assembly.directory, "node_modules"));
    const functionId = stack.getLogicalId(consumer.function.node.defaultChild as never);
    const resource = template.Resources[functionId];
    if (resource === undefined) throw new Error("the consumer function is not in the template");
    const environment = (resource.Properties.Environment as { Variables: Record<string, string> }).Variables;
    const assetPath = resource.Metadata?.["aws:asset:path"];
    expect(assetPath).toBeDefined();

    const event = {
      Records: [
        relayRecord({
          aggregateId: "order-1",
          seq: 1,
          eventType: "order.placed",
          payload: { orderId: "order-1", totalCents: 4200 },
        }),
      ],
    };
    const script = `
      const mod = await import(${JSON.stringify(join(assembly.directory, assetPath as string, "index.mjs"))});
      const context = { functionName: "billing", functionVersion: "$LATEST", awsRequestId: "req-1",
        memoryLimitInMB: "256", invokedFunctionArn: "arn:aws:lambda:us-east-1:123456789012:function:billing",
        logGroupName: "g", logStreamName: "s", getRemainingTimeInMillis: () => 25000,
        callbackWaitsForEmptyEventLoop: false };
      const result = await mod.handler(JSON.parse(process.env.TEST_EVENT), context);
      console.log("RESULT " + JSON.stringify(result));
      process.exit(0);`;
    const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
      cwd: workDir,
      encoding: "utf8",
      timeout: 60_000,
      env: {
        PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ""}`,
        // The template's environment, as Lambda would set it ...
        ...environment,
        // ... plus what Lambda and the network provide: region, credentials, the endpoint; and a local server
        // without TLS (DATABASE_SSLMODE=disable, which a deployed consumer never sets).
        AWS_REGION: LOCAL_AWS.region,
        AWS_ACCESS_KEY_ID: LOCAL_AWS.credentials.accessKeyId,
        AWS_SECRET_ACCESS_KEY: LOCAL_AWS.credentials.secretAccessKey,
        AWS_ENDPOINT_URL: inject("awsEndpoint"),
        DATABASE_SSLMODE: "disable",
        POWERTOOLS_LOG_LEVEL: "WARN",
        TEST_EVENT: JSON.stringify(event),
      },
    });
    const line = child.stdout.split("\n").find((l) => l.startsWith("RESULT "));

    expect(line, child.stderr).toBeDefined();
    expect(JSON.parse((line as string).slice("RESULT ".length)), child.stdout + child.stderr).toEqual({
      batchItemFailures: [],
    });
    const { rows } = await db.pool.query("select order_id, total_cents from invoices");
    expect(rows).toEqual([{ order_id: "order-1", total_cents: 4200 }]);
  });
});
