/**
 * The relay in a process of its own, for measures/relayMemory.ts and measures/relayQuota.ts: default options but
 * drain mode and the given byte budget, the handler's destination (lib/sqsClient.ts relayDestination) and a
 * session per parallel round. It starts when its parent writes a line to its stdin (after moving it into a CPU
 * quota group, lib/cpuQuota.ts). Prints one JSON line: events published, peak and idle RSS (MiB), the drain's
 * duration, the process's CPU time (all threads) during it and the relay thread's own.
 */
import { once } from "node:events";
import { S3Client } from "@aws-sdk/client-s3";
import pg from "pg";
import { claimCheckDestination } from "../../functions/shared/destinations/claimCheck/claimCheck.ts";
import { s3PayloadStore } from "../../functions/shared/destinations/claimCheck/s3Store.ts";
import { MAX_PAYLOAD_BYTES_LIMIT } from "../../functions/shared/outbox/payloadPointer.ts";
import { DEFAULT_RELAY_OPTIONS, roundReserveMs, runRelay } from "../../functions/shared/relay/engine.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { relayDestination } from "../lib/sqsClient.ts";

const env = (name: string) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const mib = (bytes: number) => Math.round((bytes / 1_048_576) * 10) / 10;

const s3Url = process.env.BENCH_S3_URL;
const options = {
  ...DEFAULT_RELAY_OPTIONS,
  mode: "drain" as const,
  batchMaxBytes: Number(env("BENCH_BATCH_MAX_BYTES")),
  // 64 MiB payloads: printing one takes the database 1.2-2 s on an idle machine, more beside the bench's load.
  ...(s3Url === undefined ? {} : { statementTimeoutMs: 120_000, publishTimeoutMs: 120_000 }),
};
await once(process.stdin, "data");
process.stdin.destroy();
const pool = new pg.Pool({ connectionString: env("BENCH_DATABASE_URL"), max: options.parallelRounds });
const created = await relayDestination(env("BENCH_SQS_URL"), env("BENCH_QUEUE_URL"), options);
const s3 =
  s3Url === undefined ? undefined : new S3Client({ ...LOCAL_AWS, endpoint: s3Url, forcePathStyle: true });
// With BENCH_S3_URL: the claim check, as the handler builds it with OUTBOX_PAYLOAD_BUCKET set.
const destination =
  s3 === undefined
    ? created.destination
    : claimCheckDestination(created.destination, s3PayloadStore(s3, "bench-payloads"), {
        prefix: "",
        maxPayloadBytes: MAX_PAYLOAD_BYTES_LIMIT,
      });
const destroy = () => {
  created.destroy();
  s3?.destroy();
};
await pool.query("select 1");
const idleRss = process.memoryUsage().rss;
const cpuBefore = process.cpuUsage();
const threadBefore = process.threadCpuUsage();
const started = performance.now();
// Ten minutes of rounds past the reserve no round starts without (480 s with the claim check's bounds).
const deadline = Date.now() + 600_000 + roundReserveMs(options);
const summary = await runRelay({ pool, destination, deadline }, options);
const ms = performance.now() - started;
const cpu = process.cpuUsage(cpuBefore);
const thread = process.threadCpuUsage(threadBefore);
// maxRSS is in KiB: the process's high-water mark, however briefly it was reached.
const peakRss = process.resourceUsage().maxRSS * 1024;
await pool.end();
destroy();
process.stdout.write(
  `${JSON.stringify({ published: summary.published, peakRssMiB: mib(peakRss), idleRssMiB: mib(idleRss), ms, cpuMs: (cpu.user + cpu.system) / 1000, threadCpuMs: (thread.user + thread.system) / 1000, lastError: summary.lastError })}\n`,
);
