import { randomUUID } from "node:crypto";
import type { SQSClient } from "@aws-sdk/client-sqs";
import pg from "pg";
import type { Delivery } from "../../cli/dev/aws/fakeSqs.ts";
import { roundReserveMs } from "../../functions/shared/relay/engine.ts";
import { type InvocationSummary, relayInvocation } from "../../functions/shared/relay/invocation.ts";
import { type RelayConfig, relayConfigFromEnv } from "../../functions/shared/relay/settings.ts";
import { anEvent } from "./factories.ts";
import { relayLambdaEnv } from "./lambda.ts";
import { enqueueCommitted } from "./produce.ts";
import { queueDestination } from "./relay.ts";

/**
 * Scheduled relay invocations for the hand-over tests (issue 41): each one the real relayInvocation (engine,
 * StopWatch, relay_handover row) on a pool of its own, as a Lambda container's, recording when it started and
 * ended so a test can integrate how many were alive.
 */
export interface HandoverRig {
  databaseUrl: string;
  sqs: SQSClient;
  sqsEndpoint: string;
  queueUrl: string;
}

const quiet = { info() {}, warn() {}, error() {} };

/**
 * The relay settings every invocation of a rig runs with: dwell mode, timeouts short enough for a scaled tick, and
 * a proving period scaled as the tests' ticks are (the default's 5 s of a 60 s tick is 167 ms of a 2 s one).
 */
export function handoverConfig(rig: HandoverRig, extra: Record<string, string> = {}): RelayConfig {
  return relayConfigFromEnv(
    relayLambdaEnv({
      DATABASE_URL: rig.databaseUrl,
      OUTBOX_QUEUE_URL: rig.queueUrl,
      AWS_ENDPOINT_URL: rig.sqsEndpoint,
      RELAY_MODE: "dwell",
      RELAY_PUBLISH_TIMEOUT_MS: "2000",
      RELAY_STATEMENT_TIMEOUT_MS: "1000",
      RELAY_PARALLEL_ROUNDS: "2",
      RELAY_HANDOVER_PROVING_MS: "200",
      ...extra,
    }),
  );
}

/**
 * What a test's invocation needs to start up before its first round: no process or cold start here (relayTiming's
 * HANDOVER_STARTUP_MS allows 5 s for a Lambda's), only a pool's first connection and the order-key check.
 */
const SCALED_STARTUP_MS = 500;

/**
 * How long a scheduled invocation dwells with ticks every `tickMs` and a jitter window as wide: relayTiming's
 * arithmetic (infra/relayTiming.ts: longest gap between two ticks + the successor's start-up and proving period +
 * one round's reserve), scaled down.
 */
export function scaledDwellMs(tickMs: number, config: RelayConfig): number {
  return 2 * tickMs + SCALED_STARTUP_MS + config.handoverProvingMs + roundReserveMs(config.relay);
}

export interface Invocation {
  startedAt: number;
  /** Set when the invocation returned (or failed). */
  endedAt: number | undefined;
  done: Promise<InvocationSummary>;
  /** Resolves after the invocation's first completed round (its proving period starts there). */
  firstRound: Promise<number>;
  /** Completed and failed rounds so far. */
  rounds: { completed: number; failed: number };
  /** Resolves at its next completed round from now (never, if it completes none). */
  nextRound(): Promise<void>;
  stop: AbortController;
  /** Its sessions' application_name, to end them all as a dying container's. */
  applicationName: string;
}

export function startInvocation(
  rig: HandoverRig,
  options: {
    slot?: number;
    dwellMs: number;
    config: RelayConfig;
    /** The start time it claims its slot with (default now): lets a test order two starts deterministically. */
    startedAt?: number;
    /** Another login than the rig's (one that cannot read the outbox, say). */
    databaseUrl?: string;
    onRoundFailed?: () => void;
  },
): Invocation {
  const startedAt = options.startedAt ?? Date.now();
  const applicationName = `relay-${randomUUID().slice(0, 8)}`;
  const pool = new pg.Pool({
    connectionString: options.databaseUrl ?? rig.databaseUrl,
    max: 3,
    application_name: applicationName,
  });
  // A restarted server ends idle sessions; the relay's next round reconnects.
  pool.on("error", () => {});
  pool.on("connect", (client) => client.on("error", () => {}));
  const stop = new AbortController();
  let proved: (at: number) => void = () => {};
  const firstRound = new Promise<number>((resolve) => {
    proved = resolve;
  });
  const rounds = { completed: 0, failed: 0 };
  let roundWaiters: (() => void)[] = [];
  const invocation: Invocation = {
    startedAt,
    endedAt: undefined,
    firstRound,
    rounds,
    nextRound: () => new Promise<void>((resolve) => roundWaiters.push(resolve)),
    stop,
    applicationName,
    done: relayInvocation(
      {
        pool,
        destination: queueDestination(rig.sqs, { queueUrl: rig.queueUrl }),
        deadline: startedAt + options.dwellMs,
        logger: quiet,
        signal: stop.signal,
        handover: { slot: options.slot ?? 0, startedAt },
        onRound: () => {
          rounds.completed++;
          proved(Date.now());
          const waiting = roundWaiters;
          roundWaiters = [];
          for (const resolve of waiting) resolve();
        },
        onRoundFailed: () => {
          rounds.failed++;
          options.onRoundFailed?.();
        },
      },
      options.config,
    ).finally(() => {
      invocation.endedAt = Date.now();
      return pool.end().catch(() => {});
    }),
  };
  invocation.done.catch(() => {}); // awaited by the test
  return invocation;
}

/**
 * Kills an invocation as a Lambda container that dies: it starts no more rounds, and every session it has ends
 * (what it claimed and did not record is claimable again; what it sent is sent again and deduplicated).
 */
export async function kill(invocation: Invocation, admin: pg.Pool) {
  invocation.stop.abort();
  await admin.query("select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1", [
    invocation.applicationName,
  ]);
}

/**
 * Over [from, to]: the mean number of invocations alive, and the total time with none alive (an invocation still
 * running counts as alive until `to`).
 */
export function aliveOver(invocations: readonly Invocation[], from: number, to: number) {
  const edges = invocations
    .flatMap(({ startedAt, endedAt }) => [
      { t: Math.max(from, Math.min(startedAt, to)), d: 1 },
      { t: Math.max(from, Math.min(endedAt ?? to, to)), d: -1 },
    ])
    .sort((a, b) => a.t - b.t || b.d - a.d);
  let count = 0;
  let area = 0;
  let noneAliveMs = 0;
  let last = from;
  for (const edge of edges) {
    area += count * (edge.t - last);
    if (count === 0) noneAliveMs += edge.t - last;
    count += edge.d;
    last = edge.t;
  }
  if (last < to) noneAliveMs += to - last;
  return { meanAlive: area / Math.max(1, to - from), noneAliveMs };
}

export interface Committed {
  id: string;
  group: string;
  at: number;
}

/**
 * A steady producer: one event per transaction every `intervalMs`, round-robin over `groups` aggregates, each
 * commit's time recorded. A failed commit (the database restarting) is retried, so the events committed are
 * exactly the ones recorded. The pacing is the load's, not a synchronization.
 */
export function steadyProducer(pool: pg.Pool, options: { intervalMs: number; groups: number }) {
  const committed: Committed[] = [];
  let failures = 0;
  let running = true;
  const loop = (async () => {
    const started = Date.now();
    for (let n = 0; running; n++) {
      const group = `g${n % options.groups}`;
      for (;;) {
        try {
          const event = await enqueueCommitted(pool, anEvent({ aggregateId: group }));
          committed.push({ id: event.id, group, at: Date.now() });
          break;
        } catch {
          failures++;
          if (!running) return;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
      const next = started + (n + 1) * options.intervalMs;
      if (next > Date.now()) await new Promise((resolve) => setTimeout(resolve, next - Date.now()));
    }
  })();
  return {
    committed,
    get failures() {
      return failures;
    },
    async stop() {
      running = false;
      await loop;
      return committed;
    },
  };
}

/**
 * What reached the queue against what was committed: lost (never accepted), duplicates (enqueued twice), resent
 * (sent again and dropped by the queue's deduplication, which is allowed: the fake marks them), reordered (an event accepted after a later one of its group), and each
 * event's commit→accept latency.
 */
export function compareDeliveries(committed: readonly Committed[], deliveries: readonly Delivery[]) {
  const byId = new Map(committed.map((event, index) => [event.id, { ...event, index }]));
  const seen = new Set<string>();
  const lastIndex = new Map<string, number>();
  const latencyMs = new Map<string, number>();
  let duplicates = 0;
  let resent = 0;
  let reordered = 0;
  for (const delivery of deliveries) {
    const event = delivery.dedupId === undefined ? undefined : byId.get(delivery.dedupId);
    if (event === undefined) continue;
    if (delivery.duplicate) {
      resent++;
      continue;
    }
    if (seen.has(event.id)) {
      duplicates++;
      continue;
    }
    seen.add(event.id);
    latencyMs.set(event.id, delivery.at - event.at);
    const previous = lastIndex.get(event.group);
    if (previous !== undefined && previous > event.index) reordered++;
    lastIndex.set(event.group, event.index);
  }
  return {
    lost: committed.filter((event) => !seen.has(event.id)).length,
    duplicates,
    resent,
    reordered,
    latencyMs,
  };
}

/** Resolves at `at` (epoch ms): a scenario's point on its schedule, not a wait for some state. */
export function at(time: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, time - Date.now())));
}
