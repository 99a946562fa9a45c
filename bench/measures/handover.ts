import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type pg from "pg";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { resetOutbox } from "../lib/benchDatabase.ts";
import { createBenchQueue, relaySqsClient } from "../lib/sqsClient.ts";
import type { BenchSqsEndpoint } from "../lib/sqsEndpoint.ts";

const WORKER = fileURLToPath(new URL("./handoverWorker.ts", import.meta.url));

export interface HandoverRun {
  /** The scaled tick interval T, ms: ticks at k·T + U[0, T). */
  tickMs: number;
  runMs: number;
  /** Successors killed this long after they started; null: none killed. */
  killAfterMs: number | null;
  invocations: number;
  meanAlive: number;
  /** Total time with no invocation alive, after the first one started. */
  noneAliveMs: number;
  latencyMs: { p50: number; p99: number; max: number };
  produced: number;
  lost: number;
  reordered: number;
  duplicates: number;
  stoppedBy: Record<string, number>;
}

/**
 * The relay's hand-over under EventBridge's jittered schedule, scaled down: ticks at k·T + U[0, T), each an
 * invocation of the relay handler in its own process (functions/relay/handler.ts, default options but the
 * timeouts scaled by T / 60 s, RELAY_MAX_DURATION_MS and the timeout from relayTiming's arithmetic), while a
 * producer commits `eventsPerSecond` events over 50 aggregates. With `killAfterMs`, every third invocation is
 * killed (SIGKILL) that long after it starts. Reports invocations alive, gaps, commit→accept latency at the SQS
 * endpoint, and what was lost, reordered or duplicated.
 */
export async function measureHandover(
  databaseUrl: string,
  pool: pg.Pool,
  endpoint: BenchSqsEndpoint,
  input: { tickMs: number; runMs: number; eventsPerSecond: number; killAfterMs: number | null },
): Promise<HandoverRun> {
  await resetOutbox(pool);
  await pool.query("delete from outbox_relay_handover");
  await endpoint.setLatency(20);
  const sqs = relaySqsClient(endpoint.url, 1_000);
  const queueUrl = await createBenchQueue(sqs, "handover");
  await endpoint.takeDeliveries();
  // Scaled: a 60 s schedule becomes tickMs; publish and statement timeouts 1 s and 0.5 s (a 2.5 s round reserve),
  // and the dwell cap relayTiming's arithmetic gives: interval + jitter (T + T) + the reserve.
  const reserveMs = 1_000 + 3 * 500;
  const maxDurationMs = Math.round(2 * input.tickMs + reserveMs);
  const timeoutMs = maxDurationMs + 1_000;
  const env = {
    PATH: process.env.PATH ?? "",
    DATABASE_URL: databaseUrl,
    OUTBOX_QUEUE_URL: queueUrl,
    AWS_ENDPOINT_URL: endpoint.url,
    AWS_REGION: "us-east-1",
    AWS_ACCESS_KEY_ID: "bench",
    AWS_SECRET_ACCESS_KEY: "bench",
    RELAY_PUBLISH_TIMEOUT_MS: "1000",
    RELAY_STATEMENT_TIMEOUT_MS: "500",
    RELAY_BUDGET_MARGIN_MS: "500",
    RELAY_MAX_DURATION_MS: String(maxDurationMs),
    POWERTOOLS_METRICS_DISABLED: "true",
    POWERTOOLS_LOG_LEVEL: "ERROR",
    BENCH_TIMEOUT_MS: String(timeoutMs),
  };

  const alive = new Map<number, { start: number; end?: number }>();
  const stoppedBy: Record<string, number> = {};
  const children: ChildProcess[] = [];
  const started = Date.now();
  let tick = 0;
  const timers: NodeJS.Timeout[] = [];
  const startInvocation = (index: number) => {
    const child = spawn(process.execPath, [WORKER], {
      env,
      stdio: ["ignore", "pipe", process.env.BENCH_HANDOVER_DEBUG === undefined ? "ignore" : "inherit"],
    });
    children.push(child);
    const record: { start: number; end?: number } = { start: Date.now() };
    alive.set(index, record);
    let out = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.once("exit", () => {
      record.end = Date.now();
      const reason = out.includes("stoppedBy")
        ? (JSON.parse(out.trim().split("\n").pop() ?? "{}") as { stoppedBy: string }).stoppedBy
        : "killed";
      stoppedBy[reason] = (stoppedBy[reason] ?? 0) + 1;
    });
    if (input.killAfterMs !== null && index % 3 === 2) {
      timers.push(setTimeout(() => child.kill("SIGKILL"), input.killAfterMs));
    }
  };
  // Ticks at k·T + U[0, T) until the run ends (the producer's runMs starts up to one tick and a cold start
  // later: one tick more covers that; ticks not yet due when it ends are cancelled).
  const ticks: number[] = [];
  for (let k = 0; k * input.tickMs < input.runMs + input.tickMs; k++)
    ticks.push(k * input.tickMs + Math.random() * input.tickMs);
  for (const at of ticks) {
    const index = tick++;
    timers.push(setTimeout(() => startInvocation(index), at));
  }
  // The producer starts when the first tick's invocation has completed a round (it then holds the hand-over
  // slot): an event committed before any relay claims would count the wait for the schedule's first tick (up
  // to T) and that process's cold start as relay latency, which a schedule already running never pays since the
  // previous invocation claims on until its successor proves itself. It runs for runMs from then.
  const firstTick = started + (ticks[0] ?? 0);
  while (
    (await pool.query("select 1 from outbox_relay_handover limit 1")).rowCount === 0 &&
    Date.now() < firstTick + 3 * input.tickMs
  ) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const producing = Date.now();
  // The producer: one event per transaction, round-robin over 50 aggregates, commit time recorded.
  const committed = new Map<string, { at: number; aggregate: string; seq: bigint }>();
  const intervalMs = 1_000 / input.eventsPerSecond;
  let n = 0;
  while (Date.now() - producing < input.runMs) {
    const aggregate = `a${n % 50}`;
    const [event] = await withTransaction(pool, (client) =>
      enqueue(client, [{ aggregateType: "bench", aggregateId: aggregate, eventType: "e", payload: { n } }]),
    );
    if (event !== undefined) committed.set(event.id, { at: Date.now(), aggregate, seq: event.seq });
    n++;
    const next = producing + n * intervalMs;
    if (next > Date.now()) await new Promise((resolve) => setTimeout(resolve, next - Date.now()));
  }
  for (const timer of timers) clearTimeout(timer);
  // Let the last invocations drain what is left, then stop them.
  const settle = Date.now() + 3 * input.tickMs;
  while (Date.now() < settle) {
    const { rows } = await pool.query<{ n: number }>(
      "select count(*)::int as n from outbox_events where processed_at is null",
    );
    if (rows[0]?.n === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const ended = Date.now();
  // A child killed by a signal has exited with exitCode null and its signalCode set: only running ones are waited for.
  const running = children.filter((child) => child.exitCode === null && child.signalCode === null);
  for (const child of running) child.kill("SIGTERM");
  await Promise.all(running.map((child) => new Promise((resolve) => child.once("exit", resolve))));
  sqs.destroy();

  // Alive: integrate the number of live invocations over [first start, ended].
  const edges = [...alive.values()].flatMap(({ start, end }) => [
    { t: start, d: 1 },
    { t: Math.min(end ?? ended, ended), d: -1 },
  ]);
  edges.sort((a, b) => a.t - b.t || b.d - a.d);
  let count = 0;
  let area = 0;
  let none = 0;
  const first = edges[0]?.t ?? started;
  let last = first;
  for (const edge of edges) {
    area += count * (edge.t - last);
    if (count === 0) none += edge.t - last;
    count += edge.d;
    last = edge.t;
  }
  if (last < ended) none += ended - last;
  const deliveries = await endpoint.takeDeliveries();
  const seen = new Set<string>();
  let duplicates = 0;
  const latencies: number[] = [];
  const lastSeq = new Map<string, bigint>();
  let reordered = 0;
  for (const delivery of deliveries.toSorted((a, b) => a.at - b.at)) {
    if (seen.has(delivery.dedupId)) {
      duplicates++;
      continue;
    }
    seen.add(delivery.dedupId);
    const event = committed.get(delivery.dedupId);
    if (event === undefined) continue;
    latencies.push(delivery.at - event.at);
    const previous = lastSeq.get(event.aggregate);
    if (previous !== undefined && previous > event.seq) reordered++;
    lastSeq.set(event.aggregate, event.seq);
  }
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return {
    tickMs: input.tickMs,
    runMs: ended - started,
    killAfterMs: input.killAfterMs,
    invocations: alive.size,
    meanAlive: area / Math.max(1, ended - first),
    noneAliveMs: none,
    latencyMs: { p50: at(0.5), p99: at(0.99), max: latencies.at(-1) ?? 0 },
    produced: committed.size,
    lost: [...committed.keys()].filter((id) => !seen.has(id)).length,
    reordered,
    duplicates,
    stoppedBy,
  };
}
