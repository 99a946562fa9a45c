import { spawn } from "node:child_process";
import { Metrics } from "@aws-lambda-powertools/metrics";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { claimCheckDestination } from "../../functions/shared/destinations/claimCheck/claimCheck.ts";
import { s3PayloadStore } from "../../functions/shared/destinations/claimCheck/s3Store.ts";
import { RelayMetrics } from "../../functions/shared/observe/metrics.ts";
import { type RoundReport, runRelay } from "../../functions/shared/relay/engine.ts";
import { oversizeAllowanceMs } from "../../functions/shared/relay/loadBudget.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { queueDestination, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, sqsClient } from "../support/sqs.ts";
import { startThrottlingTcpProxy, type ThrottlingTcpProxy } from "../support/tcpProxy.ts";

/**
 * Issue 38: a payload that cannot load within the load's budget. Before, the round failed as a whole on the
 * statement timeout and the row was claimed again every round with attempts 0, transient_failures 0 and
 * last_error null, until the invocation ended in NoProgressError. Now the round that may load a row past its
 * byte budget gives its load and publish time for the bytes past it (relay/loadBudget.ts), and a load that
 * still does not finish is the row's transient failure, named in last_error, counted in PayloadLoadTimeouts and
 * listed by `outbox status`. The session is made slow by a proxy that paces Postgres's replies, so the test does
 * not depend on how loaded the machine is.
 */
const db = useTestDatabase();
const MIB = 1_048_576;
const endpoint = inject("awsEndpoint");
const sqs = sqsClient();
const s3 = new S3Client({ ...LOCAL_AWS, endpoint, forcePathStyle: true });
const bucket = `outbox-slow-load-${Date.now()}`;
let proxy: ThrottlingTcpProxy;
let slowPool: pg.Pool;
let queueUrl: string;

beforeAll(async () => {
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  queueUrl = await createFifoQueue(sqs, "slow-load");
  await db.pool.query(`update ${PRIVATE}.outbox_limits set max_payload_bytes = 67108864`);
  const url = new URL(db.url);
  proxy = await startThrottlingTcpProxy(Number(url.port));
  url.hostname = "127.0.0.1";
  url.port = String(proxy.port);
  slowPool = new pg.Pool({ connectionString: url.href, max: 2 });
}, 60_000);
afterAll(async () => {
  await slowPool.end();
  await proxy.close();
  s3.destroy();
});

/** The relay with the claim check, its budget 1 MiB per round, so a payload of a few MiB loads past it. */
function relayThroughSlowSession(maxPayloadBytes: number, statementTimeoutMs: number) {
  const options = testRelayOptions(queueUrl, {
    statementTimeoutMs,
    publishTimeoutMs: 30_000,
    batchMaxBytes: MIB,
    backoffBaseMs: 60_000,
    backoffMaxMs: 60_000,
  });
  const destination = claimCheckDestination(queueDestination(sqs, options), s3PayloadStore(s3, bucket), {
    prefix: "slow/",
    maxPayloadBytes,
  });
  const rounds: RoundReport[] = [];
  const metrics = new Metrics({ namespace: "OutboxTest", serviceName: "relay" });
  const recorder = new RelayMetrics(metrics, { flushIntervalMs: 3_600_000 });
  const run = async () => {
    const summary = await runRelay(
      {
        pool: slowPool,
        destination,
        deadline: Date.now() + 120_000,
        onRound: (report) => {
          rounds.push(report);
          recorder.recordRound(report);
        },
      },
      { ...options, mode: "drain" },
    );
    recorder.finish();
    return summary;
  };
  return { run, rounds, emf: () => metrics.serializeMetrics() as unknown as Record<string, unknown> };
}

async function rowState(id: string) {
  const { rows } = await db.pool.query(
    `select processed_at is not null as published, dead_lettered_at is not null as dead, attempts,
            transient_failures, last_error
     from outbox_events where id = $1`,
    [id],
  );
  return rows[0];
}

describe("a payload slower to load than the statement timeout", () => {
  it("is published: the round that loads it past its budget gives the load time for those bytes", async () => {
    // 32 MiB limit, 1 MiB budget: (48 - 1) MiB at 4 MiB/s = 11.75 s more for the load (and the publish).
    const relay = relayThroughSlowSession(32 * MIB, 1_000);
    const { id } = await enqueueCommitted(
      db.pool,
      anEvent({ aggregateId: "slow-1", payload: { blob: "s".repeat(12 * MIB) } }),
      { maxPayloadBytes: 32 * MIB },
    );
    // 12 MiB at 2 MiB/s: ~6 s, of which the server spends all but what the sockets buffer (a few MiB on
    // loopback) sending: several times the 1 s statement timeout, half of the load's budget.
    proxy.throttle(2 * MIB);
    const started = performance.now();
    const summary = await relay.run().finally(() => proxy.throttle(undefined));

    expect(performance.now() - started).toBeGreaterThan(5_000);
    expect(summary).toMatchObject({ published: 1, failedRounds: 0 });
    expect(await rowState(id)).toMatchObject({ dead: false, attempts: 0, transient_failures: 0 });
    expect(relay.rounds.reduce((sum, round) => sum + round.loadTimeouts, 0)).toBe(0);
    expect(oversizeAllowanceMs(32 * MIB, MIB)).toBe(11_750);
  }, 120_000);
});

describe("a payload that can never load in its budget", () => {
  it("is a transient failure of its row, named in last_error, counted in PayloadLoadTimeouts and shown by outbox status", async () => {
    // 16 MiB limit, 1 MiB budget: (24 - 1) MiB at 4 MiB/s = 5.75 s more, a load budget of 6.25 s in all.
    const relay = relayThroughSlowSession(16 * MIB, 500);
    const { id } = await enqueueCommitted(
      db.pool,
      anEvent({ aggregateId: "never-1", payload: { blob: "n".repeat(16 * MIB - 100) } }),
      { maxPayloadBytes: 16 * MIB },
    );
    // 16 MiB at 1 MiB/s: ~16 s, the server sending for all but the sockets' few MiB: past the load's budget. The
    // server cancels the statement once the row it is sending is out (a backend blocked writing to its client
    // takes a cancel only after the write), so the row's whole text crosses before the error does.
    proxy.throttle(MIB);
    const summary = await relay.run().finally(() => proxy.throttle(undefined));

    expect(summary).toMatchObject({ published: 0, failedRounds: 0, failed: 1, deadLettered: 0 });
    const row = await rowState(id);
    expect(row).toMatchObject({ published: false, dead: false, attempts: 0, transient_failures: 1 });
    expect(row.last_error).toMatch(
      /^payload: did not load within the load's statement_timeout of 6250 ms \(up to \d+ bytes of JSON text\): the database or the network too slow for its size; retried with backoff, never dead-lettered/,
    );
    expect(relay.emf().PayloadLoadTimeouts).toBe(1);

    const status = await outboxStatus();
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/slow to load\s+1 {2}\(payload did not load in its budget/);
    expect(status.stdout).toContain(`${id} never-1 `);
  }, 120_000);
});

function outboxStatus(): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const cli = new URL("../../cli/outbox.ts", import.meta.url).pathname;
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!/^(DATABASE_|OUTBOX_|RELAY_|PURGE_|AWS_|TEST_)/.test(name)) env[name] = value;
  }
  const child = spawn(process.execPath, [cli, "status"], {
    env: { ...env, DATABASE_URL: db.url },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => {
    stdout += chunk;
  });
  child.stderr.on("data", (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}
