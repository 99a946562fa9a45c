import { type AddressInfo, createServer, type Socket } from "node:net";
import {
  CreateSecretCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from "@aws-sdk/client-secrets-manager";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import {
  AUTH_RETRY_MS,
  createDatabasePool,
  databaseSourceFromEnv,
} from "../../functions/shared/db/connection.ts";
import { sqlState } from "../../functions/shared/db/sqlstate.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { useTestDatabase } from "../support/db.ts";
import { lambdaContext, relayLambdaEnv } from "../support/lambda.ts";

/**
 * Issue 29, items 2 and 6: a rotation's window (the database has the new password, the secret still the old one)
 * is retried for about a minute, bounded by the caller's deadline; an AWS API with no route fails in seconds and
 * says why. Real Postgres, the secret in moto's Secrets Manager.
 */
const db = useTestDatabase();
const secrets = new SecretsManagerClient({ ...LOCAL_AWS, endpoint: inject("awsEndpoint") });
const pools: { end(): Promise<void> }[] = [];
afterAll(async () => {
  for (const pool of pools) await pool.end();
});

async function roleWithSecret(password: string) {
  const url = new URL(db.url);
  const role = `rotating_${Date.now()}_${Math.floor(Math.random() * 1000)}`;
  await db.pool.query(`create role ${role} login password '${password}'`);
  const value = (pw: string) =>
    JSON.stringify({
      engine: "postgres",
      host: url.hostname,
      port: Number(url.port),
      username: role,
      password: pw,
      dbname: url.pathname.slice(1),
    });
  const { ARN } = await secrets.send(
    new CreateSecretCommand({ Name: `outbox/rotating/${role}`, SecretString: value(password) }),
  );
  if (ARN === undefined) throw new Error("no ARN");
  return {
    role,
    arn: ARN,
    finishRotation: (pw: string) =>
      secrets.send(new PutSecretValueCommand({ SecretId: ARN, SecretString: value(pw) })),
  };
}

describe("a checkout during a rotation's window", () => {
  it("retries authentication failures, re-reading the secret, and connects once the rotation finishes", async () => {
    const { role, arn, finishRotation } = await roleWithSecret("before-rotation");
    const source = databaseSourceFromEnv({ DATABASE_SECRET_ARN: arn, DATABASE_SSLMODE: "disable" });
    const pool = await createDatabasePool(source, { max: 1, applicationName: "rotation", secrets });
    pools.push(pool);

    // setSecret: the database has the new password; finishSecret (AWSCURRENT) comes 3 s later.
    await db.pool.query(`alter role ${role} password 'after-rotation'`);
    const finished = new Promise((resolve) => setTimeout(resolve, 3_000)).then(() =>
      finishRotation("after-rotation"),
    );
    const started = Date.now();
    const client = await pool.connect();
    const elapsed = Date.now() - started;
    const { rows } = await client.query("select current_user as who");
    client.release();
    await finished;

    expect(rows[0].who).toBe(role);
    expect(elapsed).toBeGreaterThanOrEqual(2_500);
    expect(elapsed).toBeLessThan(AUTH_RETRY_MS);
  });

  it("fails after the bound, naming the secret, the user and the likely cause, with the SQLSTATE kept", async () => {
    const { role, arn } = await roleWithSecret("before-rotation");
    const source = databaseSourceFromEnv({ DATABASE_SECRET_ARN: arn, DATABASE_SSLMODE: "disable" });
    const pool = await createDatabasePool(source, {
      max: 1,
      applicationName: "rotation",
      secrets,
      authRetryMs: 4_000,
    });
    pools.push(pool);
    await db.pool.query(`alter role ${role} password 'never-in-the-secret'`);

    const started = Date.now();
    const failed = await pool.connect().catch((error: unknown) => error);
    const elapsed = Date.now() - started;

    expect(failed).toBeInstanceOf(Error);
    expect(String((failed as Error).message)).toMatch(
      new RegExp(`refused the password of ${role}@.* times in \\d+ s, re-reading secret ${arn}.*rotation`),
    );
    expect(sqlState(failed)).toBe("28P01");
    expect(elapsed).toBeGreaterThanOrEqual(2_000);
    expect(elapsed).toBeLessThan(8_000);
  });

  it("stops retrying before the caller's deadline, whatever the bound allows", async () => {
    const { role, arn } = await roleWithSecret("before-rotation");
    const source = databaseSourceFromEnv({ DATABASE_SECRET_ARN: arn, DATABASE_SSLMODE: "disable" });
    const deadline = Date.now() + 2_000;
    const pool = await createDatabasePool(source, {
      max: 1,
      applicationName: "rotation",
      secrets,
      deadline: () => deadline,
    });
    pools.push(pool);
    await db.pool.query(`alter role ${role} password 'never-in-the-secret'`);

    const failed = await pool.connect().catch((error: unknown) => error);

    expect(String((failed as Error).message)).toMatch(/refused the password/);
    expect(Date.now()).toBeLessThan(deadline + 1_000);
  });
});

describe("an AWS API without a route (no NAT gateway, no VPC endpoint)", () => {
  // Accepts every connection and never answers: what a client sees behind a black-holing network path.
  const sockets: Socket[] = [];
  const blackhole = createServer((socket) => {
    sockets.push(socket);
    socket.on("error", () => {});
  });
  let endpoint: string;
  beforeAll(async () => {
    await new Promise<void>((resolve) => blackhole.listen(0, "127.0.0.1", resolve));
    endpoint = `http://127.0.0.1:${(blackhole.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => blackhole.close(resolve));
  });

  it("fails the relay Lambda's cold start within seconds, naming the endpoint and the likely cause", async () => {
    vi.resetModules();
    Object.assign(
      process.env,
      relayLambdaEnv({
        DATABASE_URL: "",
        AWS_ENDPOINT_URL: inject("awsEndpoint"),
        OUTBOX_QUEUE_URL: `${inject("awsEndpoint")}/123456789012/blackhole.fifo`,
      }),
      {
        DATABASE_SECRET_ARN: "arn:aws:secretsmanager:us-east-1:123456789012:secret:outbox-db-AbCdEf",
        DATABASE_SSLMODE: "disable",
        AWS_ENDPOINT_URL_SECRETS_MANAGER: endpoint,
      },
    );
    delete process.env.DATABASE_URL;
    const started = Date.now();

    const failed = await import("../../functions/relay/handler.ts").then(
      async ({ handler }) => handler({}, lambdaContext(60_000)),
      (error: unknown) => error,
    );

    const elapsed = Date.now() - started;
    expect(String((failed as Error).message)).toMatch(
      new RegExp(
        `${endpoint} did not answer .*no route to the secretsmanager API.*NAT gateway.*VPC endpoint`,
      ),
    );
    expect(elapsed).toBeLessThan(15_000);
  });
});
