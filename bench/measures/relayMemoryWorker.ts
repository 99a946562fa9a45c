/**
 * The relay in a process of its own, for measures/relayMemory.ts and measures/relayQuota.ts: default options but
 * drain mode and the given byte budget, the handler's destination (lib/sqsClient.ts relayDestination) and a
 * session per parallel round. It starts when its parent writes a line to its stdin (after moving it into a CPU
 * quota group, lib/cpuQuota.ts). Prints one JSON line: events published, peak and idle RSS (MiB), the drain's
 * duration and the process's CPU time (all threads) during it.
 */
import { once } from "node:events";
import pg from "pg";
import { DEFAULT_RELAY_OPTIONS, runRelay } from "../../functions/shared/relay/engine.ts";
import { relayDestination } from "../lib/sqsClient.ts";

const env = (name: string) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const mib = (bytes: number) => Math.round((bytes / 1_048_576) * 10) / 10;

const options = {
  ...DEFAULT_RELAY_OPTIONS,
  mode: "drain" as const,
  batchMaxBytes: Number(env("BENCH_BATCH_MAX_BYTES")),
};
await once(process.stdin, "data");
process.stdin.destroy();
const pool = new pg.Pool({ connectionString: env("BENCH_DATABASE_URL"), max: options.parallelRounds });
const { destination, destroy } = relayDestination(env("BENCH_SQS_URL"), env("BENCH_QUEUE_URL"), options);
await pool.query("select 1");
const idleRss = process.memoryUsage().rss;
const cpuBefore = process.cpuUsage();
const started = performance.now();
const summary = await runRelay({ pool, destination, deadline: Date.now() + 600_000 }, options);
const ms = performance.now() - started;
const cpu = process.cpuUsage(cpuBefore);
// maxRSS is in KiB: the process's high-water mark, however briefly it was reached.
const peakRss = process.resourceUsage().maxRSS * 1024;
await pool.end();
destroy();
process.stdout.write(
  `${JSON.stringify({ published: summary.published, peakRssMiB: mib(peakRss), idleRssMiB: mib(idleRss), ms, cpuMs: (cpu.user + cpu.system) / 1000, lastError: summary.lastError })}\n`,
);
