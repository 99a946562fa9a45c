import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CreateSecretCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from "@aws-sdk/client-secrets-manager";
import { afterAll, describe, expect, inject, it } from "vitest";
import {
  createDatabasePool,
  databaseSourceFromEnv,
  queryTimeoutFor,
} from "../../functions/shared/db/connection.ts";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { ConfigError, DatabaseTimeoutError } from "../../functions/shared/outbox/errors.ts";
import { runRelay } from "../../functions/shared/relay/engine.ts";
import { checkMaxDuration } from "../../functions/shared/relay/invocation.ts";
import { relayConfigFromEnv } from "../../functions/shared/relay/settings.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { queueDestination, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, sqsClient } from "../support/sqs.ts";
import { startStallingTcpProxy } from "../support/tcpProxy.ts";

const db = useTestDatabase();
const secrets = new SecretsManagerClient({ ...LOCAL_AWS, endpoint: inject("awsEndpoint") });

describe("relay configuration from the environment", () => {
  const base = {
    DATABASE_URL: "postgres://u:p@localhost:5432/app",
    OUTBOX_QUEUE_URL: "http://localhost/q.fifo",
  };

  it("applies documented defaults", () => {
    const config = relayConfigFromEnv(base);
    expect(config.relay).toMatchObject({
      batchSize: 250,
      concurrency: 25,
      parallelRounds: 4,
      maxAttempts: 10,
      mode: "dwell",
      strictOrder: false,
      batchMaxBytes: 16_777_216,
    });
    expect(config).toMatchObject({ budgetMarginMs: 5_000, listen: false });
  });

  it("takes 0 and false as real values, not as unset", () => {
    const config = relayConfigFromEnv({ ...base, RELAY_BUDGET_MARGIN_MS: "0", RELAY_STRICT_ORDER: "false" });
    expect(config.budgetMarginMs).toBe(0);
    expect(config.relay.strictOrder).toBe(false);
  });

  it.each([
    [{ OUTBOX_QUEUE_URL: undefined }, /neither OUTBOX_QUEUE_URL nor OUTBOX_EVENT_BUS_NAME is set/],
    [{ RELAY_BATCH_SIZE: "1001" }, /RELAY_BATCH_SIZE must be an integer from 1 to 1000, got "1001"/],
    [{ RELAY_BATCH_SIZE: "ten" }, /RELAY_BATCH_SIZE must be an integer/],
    [{ RELAY_MODE: "fast" }, /RELAY_MODE must be one of dwell, drain, got "fast"/],
    [
      { RELAY_BATCH_MAX_BYTES: "512" },
      /RELAY_BATCH_MAX_BYTES must be an integer from 1024 to 1073741824, got "512"/,
    ],
    [{ RELAY_STRICT_ORDER: "maybe" }, /RELAY_STRICT_ORDER must be true or false/],
    [{ OUTBOX_TABLE: "x; drop table y" }, /table: .* is not an accepted identifier/],
    [{ DATABASE_URL: undefined }, /set DATABASE_URL .* or DATABASE_SECRET_ARN/],
    [
      { DATABASE_SECRET_ARN: "arn:aws:secretsmanager:us-east-1:1:secret:x" },
      /either DATABASE_URL or DATABASE_SECRET_ARN/,
    ],
    [{ DATABASE_URL: "mysql://x" }, /DATABASE_URL must start with postgres:\/\//],
  ])("rejects %j with an error naming the variable", (overrides, message) => {
    expect(() => relayConfigFromEnv({ ...base, ...overrides })).toThrow(ConfigError);
    expect(() => relayConfigFromEnv({ ...base, ...overrides })).toThrow(message);
  });

  it("refuses at cold start a RELAY_MAX_DURATION_MS that cannot fit one round", () => {
    // Defaults: one round reserves 10,000 + 3 x 5,000 ms.
    const config = relayConfigFromEnv({ ...base, RELAY_MAX_DURATION_MS: "20000" });

    expect(() => checkMaxDuration(config)).toThrow(ConfigError);
    expect(() => checkMaxDuration(config)).toThrow(
      /RELAY_MAX_DURATION_MS=20000 cannot fit one round, which reserves 25000 ms/,
    );
    expect(() =>
      checkMaxDuration(relayConfigFromEnv({ ...base, RELAY_MAX_DURATION_MS: "25000" })),
    ).not.toThrow();
  });

  it("verifies a DATABASE_URL's TLS against the RDS CA bundle unless the URL chooses its own", () => {
    const source = (url: string) => databaseSourceFromEnv({ DATABASE_URL: url });
    expect(source("postgres://u:p@db.example.internal:5432/app")).toMatchObject({
      kind: "url",
      tls: "verify-full",
      caFile: "/var/runtime/ca-cert.pem",
    });
    // pg would check `require` against Node's CAs, which lack the RDS CA: it gets the bundle too.
    expect(source("postgres://u:p@h/app?sslmode=require")).toMatchObject({ tls: "verify-full" });
    expect(source("postgres://u:p@h/app?sslmode=disable")).toMatchObject({ tls: "from-url" });
    expect(source("postgres://u:p@h/app?sslmode=verify-full&sslrootcert=/ca.pem")).toMatchObject({
      tls: "from-url",
    });
  });

  it("verifies TLS against the Lambda runtime's Amazon CA bundle by default for a secret", () => {
    const source = databaseSourceFromEnv({
      DATABASE_SECRET_ARN: "arn:aws:secretsmanager:us-east-1:1:secret:db",
    });
    expect(source).toMatchObject({ kind: "secret", tls: "verify-full", caFile: "/var/runtime/ca-cert.pem" });
  });
});

describe("database pool from a Secrets Manager secret (RDS format)", () => {
  const pools: { end(): Promise<void> }[] = [];
  afterAll(async () => {
    for (const pool of pools) await pool.end();
  });

  it("connects with the secret and picks up a rotated password after an authentication failure", async () => {
    const url = new URL(db.url);
    const role = `relay_${Date.now()}`;
    await db.pool.query(`create role ${role} login password 'first-password'`);
    const { ARN } = await secrets.send(
      new CreateSecretCommand({
        Name: `outbox/db/${role}`,
        SecretString: JSON.stringify({
          engine: "postgres",
          host: url.hostname,
          port: Number(url.port),
          username: role,
          password: "first-password",
          dbname: url.pathname.slice(1),
        }),
      }),
    );
    const source = databaseSourceFromEnv({ DATABASE_SECRET_ARN: ARN, DATABASE_SSLMODE: "disable" });
    const pool = await createDatabasePool(source, { max: 1, applicationName: "test", secrets });
    pools.push(pool);
    const first = await pool.connect();
    const { rows } = await first.query("select current_user as who");
    first.release(true);

    // Rotation: the database and the secret change; the pool still caches the old password.
    await db.pool.query(`alter role ${role} password 'second-password'`);
    const current = JSON.parse(
      JSON.stringify({ host: url.hostname, port: Number(url.port), username: role }),
    );
    await secrets.send(
      new PutSecretValueCommand({
        SecretId: ARN,
        SecretString: JSON.stringify({
          ...current,
          password: "second-password",
          dbname: url.pathname.slice(1),
        }),
      }),
    );
    const second = await pool.connect();
    const after = await second.query("select current_user as who");
    second.release();

    expect(rows[0].who).toBe(role);
    expect(after.rows[0].who).toBe(role);
  });

  it("follows an alternating-users rotation: a new username in the secret gets a pool of its own", async () => {
    const url = new URL(db.url);
    const suffix = Date.now();
    const [userA, userB] = [`relay_a_${suffix}`, `relay_b_${suffix}`];
    await db.pool.query(`create role ${userA} login password 'password-a'`);
    await db.pool.query(`create role ${userB} login password 'password-b'`);
    const secretFor = (username: string, password: string) =>
      JSON.stringify({
        engine: "postgres",
        host: url.hostname,
        port: Number(url.port),
        username,
        password,
        dbname: url.pathname.slice(1),
      });
    const { ARN } = await secrets.send(
      new CreateSecretCommand({ Name: `outbox/db/${userA}`, SecretString: secretFor(userA, "password-a") }),
    );
    const source = databaseSourceFromEnv({ DATABASE_SECRET_ARN: ARN, DATABASE_SSLMODE: "disable" });
    const pool = await createDatabasePool(source, { max: 1, applicationName: "test", secrets });
    pools.push(pool);
    const first = await pool.connect();
    const before = await first.query("select current_user as who");
    first.release(true); // the next checkout opens a new connection

    // The rotation switches the secret to the other user; the first user's password then changes too.
    await secrets.send(
      new PutSecretValueCommand({ SecretId: ARN, SecretString: secretFor(userB, "password-b") }),
    );
    await db.pool.query(`alter role ${userA} password 'rotated-away'`);
    const after = await withTransaction(pool, (client) => client.query("select current_user as who"));

    expect(before.rows[0].who).toBe(userA);
    expect(after.rows[0].who).toBe(userB);
  });

  it("fails with a clear error when the secret is not in the RDS format", async () => {
    const { ARN } = await secrets.send(
      new CreateSecretCommand({ Name: `outbox/bad/${Date.now()}`, SecretString: '{"user":"x"}' }),
    );
    const source = databaseSourceFromEnv({ DATABASE_SECRET_ARN: ARN, DATABASE_SSLMODE: "disable" });
    await expect(createDatabasePool(source, { max: 1, applicationName: "test", secrets })).rejects.toThrow(
      /has no "username" \(expected the RDS secret format\)/,
    );
  });

  it("replaces a connection that died between invocations instead of failing", async () => {
    const source = databaseSourceFromEnv({ DATABASE_URL: db.url });
    const pool = await createDatabasePool(source, {
      max: 1,
      applicationName: "frozen-lambda",
      onError: () => {},
    });
    pools.push(pool);
    const client = await pool.connect();
    const { rows } = await client.query<{ pid: number }>("select pg_backend_pid() as pid");
    client.release();
    // As if the server ended the session while the container was frozen.
    await db.pool.query("select pg_terminate_backend($1)", [rows[0]?.pid]);

    const attempt = () => withTransaction(pool, (c) => c.query("select 1 as ok"));
    const first = await attempt().then(
      () => "ok",
      () => "failed",
    );
    const second = await attempt();

    expect(["ok", "failed"]).toContain(first);
    expect(second.rows[0].ok).toBe(1);
  });
});

describe("a connection that goes silent without closing", () => {
  const queryTimeoutMs = 500;
  // What bounds a silent connection without a client-side timeout: TCP retransmissions, ~15 minutes on Linux.
  // Anything far below that shows the bound is ours.
  const farBelowTcp = 15_000;

  async function poolThroughProxy(timeoutMs = queryTimeoutMs) {
    const proxy = await startStallingTcpProxy(Number(new URL(db.url).port));
    const url = new URL(db.url);
    url.port = String(proxy.port);
    const pool = await createDatabasePool(databaseSourceFromEnv({ DATABASE_URL: url.toString() }), {
      max: 1,
      applicationName: "silent-network",
      queryTimeoutMs: timeoutMs,
      onError: () => {},
    });
    return { proxy, pool };
  }

  it("fails a COMMIT within the query timeout, discards the session and carries on with a fresh one", async () => {
    const { proxy, pool } = await poolThroughProxy();
    try {
      await withTransaction(pool, (client) => client.query("select 1"));

      const started = Date.now();
      const committing = withTransaction(pool, async (client) => {
        await client.query("select 1");
        proxy.stall(); // the COMMIT that follows is never answered
      });
      await expect(committing).rejects.toThrow(DatabaseTimeoutError);
      const elapsed = Date.now() - started;
      const next = await withTransaction(pool, (client) => client.query("select 1 as ok"));

      expect(elapsed).toBeLessThan(farBelowTcp);
      expect(next.rows[0].ok).toBe(1);
      expect(proxy.connections).toBe(2);
    } finally {
      await pool.end();
      await proxy.close();
    }
  });

  it("fails a statement on a pooled session that died while idle, instead of hanging the checkout", async () => {
    const { proxy, pool } = await poolThroughProxy();
    try {
      await withTransaction(pool, (client) => client.query("select 1"));
      proxy.stall(); // as if the container froze and the path died meanwhile

      const started = Date.now();
      const failed = await withTransaction(pool, (client) => client.query("select 1")).catch(
        (error: unknown) => error,
      );

      expect(failed).toBeInstanceOf(DatabaseTimeoutError);
      expect(String((failed as Error).message)).toMatch(/did not answer in time/);
      expect(Date.now() - started).toBeLessThan(farBelowTcp);
    } finally {
      await pool.end();
      await proxy.close();
    }
  });
});

describe("the relay on a connection that goes silent", () => {
  it("fails that round within the statement timeout + 1 s and publishes everything on a fresh session", async () => {
    const sqs = sqsClient();
    const options = testRelayOptions(await createFifoQueue(sqs, "silent"), { statementTimeoutMs: 500 });
    const proxy = await startStallingTcpProxy(Number(new URL(db.url).port));
    const url = new URL(db.url);
    url.port = String(proxy.port);
    const pool = await createDatabasePool(databaseSourceFromEnv({ DATABASE_URL: url.toString() }), {
      max: 1,
      applicationName: "silent-relay",
      queryTimeoutMs: queryTimeoutFor(options.statementTimeoutMs),
      onError: () => {},
    });
    try {
      await withTransaction(pool, (client) => client.query("select 1")); // a pooled, idle session
      const ids = (await enqueueCommitted(db.pool, [anEvent(), anEvent()])).map((row) => row.id);
      proxy.stall();

      const summary = await runRelay(
        { pool, destination: queueDestination(sqs, options), deadline: Date.now() + 30_000 },
        options,
      );

      expect(summary).toMatchObject({ failedRounds: 1, published: 2, stoppedBy: "drained" });
      expect(summary.lastError).toMatch(/DatabaseTimeoutError: the database did not answer in time/);
      expect(summary.durationMs).toBeLessThan(15_000);
      const { rows } = await db.pool.query(
        "select count(*)::int as n from outbox_events where id = any($1) and processed_at is not null",
        [ids],
      );
      expect(rows[0].n).toBe(2);
    } finally {
      await pool.end();
      await proxy.close();
      sqs.destroy();
    }
  });
});

describe("TLS for a DATABASE_URL", () => {
  it("requires TLS by default and says how to opt out for a local server", async () => {
    const caFile = join(tmpdir(), `outbox-ca-${Date.now()}.pem`);
    await writeFile(caFile, "");
    const url = new URL(db.url);
    url.searchParams.delete("sslmode");
    const source = databaseSourceFromEnv({ DATABASE_URL: url.toString(), DATABASE_CA_FILE: caFile });
    const pool = await createDatabasePool(source, { max: 1, applicationName: "tls", onError: () => {} });
    try {
      const failed = await pool.connect().catch((error: unknown) => error);

      expect(failed).toBeInstanceOf(ConfigError);
      expect(String((failed as Error).message)).toMatch(/does not accept TLS.*add \?sslmode=disable/);
    } finally {
      await pool.end();
    }
  });

  it("names DATABASE_CA_FILE and sslmode=disable when the CA bundle cannot be read", async () => {
    const source = databaseSourceFromEnv({
      DATABASE_URL: "postgres://u:p@db.example.internal:5432/app",
      DATABASE_CA_FILE: "/nonexistent/global-bundle.pem",
    });

    await expect(createDatabasePool(source, { max: 1, applicationName: "tls" })).rejects.toThrow(
      /cannot read the database CA bundle \/nonexistent\/global-bundle.pem.*DATABASE_CA_FILE.*sslmode=disable/,
    );
  });
});
