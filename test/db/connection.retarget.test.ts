import {
  CreateSecretCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from "@aws-sdk/client-secrets-manager";
import { afterAll, describe, expect, inject, it } from "vitest";
import { createDatabasePool, databaseSourceFromEnv } from "../../functions/shared/db/connection.ts";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { useTestDatabase } from "../support/db.ts";
import { startStallingTcpProxy } from "../support/tcpProxy.ts";

const db = useTestDatabase();
const secrets = new SecretsManagerClient({ ...LOCAL_AWS, endpoint: inject("awsEndpoint") });

/**
 * A restored or replaced cluster changes the secret's host (a rotation may change the user), while the old host
 * may still answer: a pool that waits for an authentication failure keeps warm relays on the old database. The
 * "new host" here is a TCP proxy to the same server under another host name and port, so every connection that
 * goes there is counted.
 */
describe("a secret whose target changes", () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  async function secretPool(ttlSeconds: number, client = secrets, onError?: (error: Error) => void) {
    const url = new URL(db.url);
    const fields = {
      engine: "postgres",
      host: url.hostname,
      port: Number(url.port),
      username: decodeURIComponent(url.username),
      password: decodeURIComponent(url.password),
      dbname: url.pathname.slice(1),
    };
    const { ARN } = await secrets.send(
      new CreateSecretCommand({
        Name: `outbox/retarget/${Date.now()}-${Math.random()}`,
        SecretString: JSON.stringify(fields),
      }),
    );
    const source = databaseSourceFromEnv({
      DATABASE_SECRET_ARN: ARN,
      DATABASE_SSLMODE: "disable",
      DATABASE_SECRET_TTL_SECONDS: String(ttlSeconds),
    });
    const pool = await createDatabasePool(source, {
      max: 2,
      applicationName: "retarget",
      secrets: client,
      ...(onError === undefined ? {} : { onError }),
    });
    cleanups.push(() => pool.end());
    const proxy = await startStallingTcpProxy(Number(url.port));
    cleanups.push(() => proxy.close());
    const moveToProxy = () =>
      secrets.send(
        new PutSecretValueCommand({
          SecretId: ARN,
          SecretString: JSON.stringify({
            ...fields,
            // Another name for the same machine: the host changes, not only the port.
            host: url.hostname === "localhost" ? "127.0.0.1" : "localhost",
            port: proxy.port,
          }),
        }),
      );
    return { pool, proxy, moveToProxy };
  }

  const port = (pool: Parameters<typeof withTransaction>[0]) =>
    withTransaction(pool, (c) =>
      c.query<{ port: number | null }>("select inet_server_port() as port, pg_backend_pid() as pid"),
    );

  it("moves to the new host once the TTL has passed, without an authentication failure, leaving warm sessions", async () => {
    // TTL 0: every checkout may re-read the secret, so the change is due at the next one.
    const { pool, proxy, moveToProxy } = await secretPool(0);
    const before = await port(pool); // its session goes back to the pool, warm, still on the old host

    await moveToProxy();
    const after = await port(pool);
    const again = await port(pool);

    expect(before.rows[0]?.port).toBe(Number(new URL(db.url).port));
    // Through the proxy: the old pool's warm session was not reused.
    expect(proxy.connections).toBe(1);
    expect(after.rows[0]).toBeDefined();
    // And it stays there: the second checkout reuses the new pool's session, no new connection.
    expect(proxy.connections).toBe(1);
    expect(again.rows[0]).toBeDefined();
  });

  it("stays on the cached target within the TTL (no Secrets Manager call per checkout)", async () => {
    const { pool, proxy, moveToProxy } = await secretPool(900);
    await port(pool);

    await moveToProxy();
    await port(pool);

    expect(proxy.connections).toBe(0);
  });

  it("keeps the current target when the secret cannot be re-read, and says so", async () => {
    // Secrets Manager unreachable: every GetSecretValue of this client fails once `outage` is set (an SDK
    // middleware, since the emulator cannot be made to refuse one client).
    let outage = false;
    const flaky = new SecretsManagerClient({ ...LOCAL_AWS, endpoint: inject("awsEndpoint") });
    flaky.middlewareStack.add(
      (next) => (args) => (outage ? Promise.reject(new Error("connect ETIMEDOUT")) : next(args)),
      { step: "initialize", name: "outage" },
    );
    const errors: Error[] = [];
    const { pool, proxy, moveToProxy } = await secretPool(0, flaky, (error) => errors.push(error));
    const before = await port(pool);

    await moveToProxy();
    outage = true;
    const during = await port(pool);

    expect(during.rows[0]?.port).toBe(before.rows[0]?.port);
    expect(proxy.connections).toBe(0);
    expect(errors.map((error) => error.message)).toEqual([
      expect.stringMatching(
        /re-reading the database secret failed \(connect ETIMEDOUT\); staying on the current target/,
      ),
    ]);
    flaky.destroy();
  });
});
