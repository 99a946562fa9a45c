import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type pg from "pg";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { HANDOVER_STARTUP_MS } from "../../functions/shared/relay/handover.ts";
import { RELAY_SETTINGS } from "../../functions/shared/relay/settings.ts";
import { pendingCount, resetOutbox } from "../lib/benchDatabase.ts";
import { createBenchQueue, relaySqsClient } from "../lib/sqsClient.ts";
import type { BenchSqsEndpoint } from "../lib/sqsEndpoint.ts";

const WORKER = fileURLToPath(new URL("./handoverWorker.ts", import.meta.url));

export interface HandoverRun {
  /** The scaled tick interval T, ms: ticks at k·T + U[0, T). */
  tickMs: number;
  runMs: number;
  /** Successors killed this long after they started; null: none killed. */
  killAfterMs: number | null;
  /** RELAY_HANDOVER_PROVING_MS the invocations ran with. */
  provingMs: number;
  /** RELAY_IDLE_STOP_MS the invocations ran with; null: off (they dwell until handed over). */
  idleStopMs: number | null;
  invocations: number;
  meanAlive: number;
  /** meanAlive on a 1-minute schedule: the same overlap per tick over 60 s instead of T (1 + (meanAlive - 1) x T / 60). */
  meanAliveAt60s: number;
  /** Total time with no invocation alive, after the first one started. */
  noneAliveMs: number;
  latencyMs: { p50: number; p99: number; max: number };
  produced: number;
  /** Committed, never accepted by the endpoint, and no longer pending: a real loss. */
  lost: number;
  /** Still unpublished when the bench stopped waiting (bounded): late, not lost. */
  pendingAtEnd: number;
  reordered: number;
  /** Sends of an id the endpoint had already accepted (a killed invocation's requests sent again): FIFO drops them. */
  duplicates: number;
  /** With idle stop: the latency of each lone event committed after a quiet spell (the first after it), ms. */
  afterQuietMs?: number[];
  stoppedBy: Record<string, number>;
}

export interface HandoverInput {
  tickMs: number;
  runMs: number;
  eventsPerSecond: number;
  killAfterMs: number | null;
  /** RELAY_IDLE_STOP_MS; null: off. With it the producer makes quiet spells, each ended by one event. */
  idleStopMs: number | null;
}

/**
 * The relay's hand-over under EventBridge's jittered schedule, scaled down: ticks at k·T + U[0, T), each an
 * invocation of the relay handler in its own process (functions/relay/handler.ts, default options but the
 * timeouts scaled by T / 60 s, RELAY_MAX_DURATION_MS and the timeout from relayTiming's arithmetic), while a
 * producer commits `eventsPerSecond` events over 50 aggregates. With `killAfterMs`, every third invocation is
 * killed (SIGKILL) that long after it starts. With `idleStopMs`, the producer alternates bursts with quiet spells
 * long enough for every invocation to stop, each ended by one event whose latency is the idle stop's cost.
 * Reports invocations alive, gaps, commit→accept latency at the SQS endpoint, and what was lost, left pending,
 * reordered or sent twice. The start-up (a process's, like a Lambda's cold start) and the proving period are real
 * time, not scaled: they are what a hand-over costs per tick whatever the interval.
 */
export async function measureHandover(
  databaseUrl: string,
  pool: pg.Pool,
  endpoint: BenchSqsEndpoint,
  input: HandoverInput,
): Promise<HandoverRun> {
  await resetOutbox(pool);
  await pool.query("delete from outbox_relay_handover");
  await endpoint.setLatency(20);
  const sqs = relaySqsClient(endpoint.url, 1_000);
  const queueUrl = await createBenchQueue(sqs, "handover");
  await endpoint.takeDeliveries();
  // Scaled: publish and statement timeouts 1 s and 0.5 s (a 2.5 s round reserve), and the dwell cap relayTiming's
  // arithmetic gives: interval + jitter (T + T) + the hand-over allowance (start-up and proving period) + reserve.
  const provingMs = RELAY_SETTINGS.handoverProvingMs.default;
  const reserveMs = 1_000 + 3 * 500;
  const maxDurationMs = Math.round(2 * input.tickMs + HANDOVER_STARTUP_MS + provingMs + reserveMs);
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
    RELAY_HANDOVER_PROVING_MS: String(provingMs),
    ...(input.idleStopMs === null ? {} : { RELAY_IDLE_STOP_MS: String(input.idleStopMs) }),
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
    child.once("exit", (_code, signal) => {
      record.end = Date.now();
      // SIGKILL: the run's killed successors; SIGTERM: still dwelling when the bench stopped the schedule.
      const reason = out.includes("stoppedBy")
        ? (JSON.parse(out.trim().split("\n").pop() ?? "{}") as { stoppedBy: string }).stoppedBy
        : signal === "SIGKILL"
          ? "killed"
          : "runningAtEnd";
      stoppedBy[reason] = (stoppedBy[reason] ?? 0) + 1;
    });
    if (input.killAfterMs !== null && index % 3 === 2) {
      timers.push(setTimeout(() => child.kill("SIGKILL"), input.killAfterMs));
    }
  };
  // Ticks at k·T + U[0, T), one scheduled a tick ahead, until the bench stops waiting for the last events (the
  // schedule keeps running while they drain, as it does in production).
  let ticking = true;
  const schedule = (k: number) => {
    if (!ticking) return;
    const index = tick++;
    timers.push(
      setTimeout(
        () => startInvocation(index),
        started + k * input.tickMs + Math.random() * input.tickMs - Date.now(),
      ),
    );
    timers.push(setTimeout(() => schedule(k + 1), started + k * input.tickMs - Date.now()));
  };
  schedule(0);
  // The producer starts when the first tick's invocation has proved itself (it then holds the hand-over slot):
  // an event committed before any relay claims would count the wait for the schedule's first tick (up
  // to T) and that process's cold start as relay latency, which a schedule already running never pays since the
  // previous invocation claims on until its successor proves itself. It runs for runMs from then.
  // (With idle stop there is no such wait: an invocation that finds nothing to claim stops before it proves
  // itself, and the run starts with a quiet spell anyway.)
  while (
    input.idleStopMs === null &&
    (await pool.query("select 1 from outbox_relay_handover limit 1")).rowCount === 0 &&
    Date.now() < started + 4 * input.tickMs
  ) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const producing = Date.now();
  // The producer: one event per transaction, round-robin over 50 aggregates, commit time recorded.
  const committed = new Map<string, { at: number; aggregate: string; seq: bigint }>();
  const intervalMs = 1_000 / input.eventsPerSecond;
  let n = 0;
  const commitOne = async () => {
    const aggregate = `a${n % 50}`;
    const [event] = await withTransaction(pool, (client) =>
      enqueue(client, [{ aggregateType: "bench", aggregateId: aggregate, eventType: "e", payload: { n } }]),
    );
    n++;
    if (event !== undefined) committed.set(event.id, { at: Date.now(), aggregate, seq: event.seq });
    return event?.id;
  };
  const probes: string[] = [];
  if (input.idleStopMs === null) {
    while (Date.now() - producing < input.runMs) {
      await commitOne();
      const next = producing + n * intervalMs;
      if (next > Date.now()) await sleep(next - Date.now());
    }
  } else {
    // Quiet spells, each ended by one lone event: the idle stop, a second for the last round and the stop to land,
    // then a random part of a tick (so the lone event meets the schedule at any phase). Once it is published (an
    // invocation is claiming again), a burst of QUIET_BURST_MS at the run's rate, then the next spell.
    while (Date.now() - producing < input.runMs) {
      await sleep(input.idleStopMs + 1_000 + Math.random() * input.tickMs);
      const probe = await commitOne();
      if (probe === undefined) continue;
      probes.push(probe);
      const bound = Date.now() + 3 * input.tickMs + HANDOVER_STARTUP_MS;
      while (Date.now() < bound && (await isPending(pool, probe))) await sleep(50);
      const burst = Date.now();
      for (let i = 0; Date.now() - burst < QUIET_BURST_MS; i++) {
        await commitOne();
        const next = burst + (i + 1) * intervalMs;
        if (next > Date.now()) await sleep(next - Date.now());
      }
    }
  }
  // Let the schedule drain what is left (bounded: three ticks and a start-up), then stop it and its invocations.
  const settle = Date.now() + 3 * input.tickMs + HANDOVER_STARTUP_MS;
  while (Date.now() < settle && (await pendingCount(pool)) > 0) await sleep(200);
  ticking = false;
  for (const timer of timers) clearTimeout(timer);
  const ended = Date.now();
  const pendingIds = new Set(
    (
      await pool.query<{ id: string }>(
        "select id from outbox_events where processed_at is null and dead_lettered_at is null",
      )
    ).rows.map((row) => row.id),
  );
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
  const firstAccepted = new Map<string, number>();
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
    firstAccepted.set(delivery.dedupId, delivery.at);
    const event = committed.get(delivery.dedupId);
    if (event === undefined) continue;
    latencies.push(delivery.at - event.at);
    const previous = lastSeq.get(event.aggregate);
    if (previous !== undefined && previous > event.seq) reordered++;
    lastSeq.set(event.aggregate, event.seq);
  }
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  const meanAlive = area / Math.max(1, ended - first);
  const unaccepted = [...committed.keys()].filter((id) => !seen.has(id));
  return {
    tickMs: input.tickMs,
    runMs: ended - started,
    killAfterMs: input.killAfterMs,
    provingMs,
    idleStopMs: input.idleStopMs,
    invocations: alive.size,
    meanAlive,
    meanAliveAt60s: 1 + ((meanAlive - 1) * input.tickMs) / 60_000,
    noneAliveMs: none,
    latencyMs: { p50: at(0.5), p99: at(0.99), max: latencies.at(-1) ?? 0 },
    produced: committed.size,
    lost: unaccepted.filter((id) => !pendingIds.has(id)).length,
    pendingAtEnd: unaccepted.filter((id) => pendingIds.has(id)).length,
    reordered,
    duplicates,
    ...(input.idleStopMs === null
      ? {}
      : {
          afterQuietMs: probes.map(
            (id) => (firstAccepted.get(id) ?? Number.NaN) - (committed.get(id)?.at ?? 0),
          ),
        }),
    stoppedBy,
  };
}

/** With idle stop on: each burst's length before a quiet spell. */
const QUIET_BURST_MS = 2_000;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

async function isPending(pool: pg.Pool, id: string): Promise<boolean> {
  const { rowCount } = await pool.query(
    "select 1 from outbox_events where id = $1 and processed_at is null and dead_lettered_at is null",
    [id],
  );
  return (rowCount ?? 0) > 0;
}
