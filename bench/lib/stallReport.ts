import type { DatabaseView } from "./databaseWatch.ts";
import { dominantPhase, type RoundTrace, roundMs } from "./roundTrace.ts";
import { percentile } from "./stats.ts";
import type { ThreadPauses } from "./threadPauses.ts";

/** A thread's pauses, summarized for the results file: the long ones keep their times. */
export interface PausesSummary {
  delayP99Ms: number;
  delayMaxMs: number;
  gcCount: number;
  gcTotalMs: number;
  /** GC pauses and late event-loop ticks of 50 ms or more, ms since the run started. */
  long: { atMs: number; ms: number; what: string }[];
  heapUsedMiB: { start: number; end: number };
}

export interface SlowRound {
  /** ms since the relay started. */
  atMs: number;
  totalMs: number;
  rows: number;
  phases: Omit<RoundTrace, "startedAt" | "endedAt" | "rows">;
  /** The evidence that overlaps the round, largest first: its slowest phase, thread pauses, the database. */
  cause: string;
}

export interface LatencySpike {
  /** Commit times (ms since the relay started) of the events that waited longer than the spike threshold. */
  fromMs: number;
  toMs: number;
  events: number;
  maxMs: number;
  cause: string;
}

export interface StallReport {
  rounds: number;
  /** Per phase across the run's rounds: p99 and max, ms. */
  phases: Record<string, { p99: number; max: number }>;
  slowestRounds: SlowRound[];
  spikeThresholdMs: number;
  spikes: LatencySpike[];
  relayThread: PausesSummary;
  endpointThread: PausesSummary;
  /**
   * CPU ms over the run: the relay's thread (which also runs the producer), the endpoint's, and the process's
   * other threads: V8's concurrent GC markers and sweepers, its background JIT compiler, libuv's pool. A major GC of a big heap shows
   * there, taking a core from everyone for seconds, while its pauses on the thread itself stay short.
   */
  cpuMs?: { relayThread: number; endpointThread: number; otherThreads: number; wallMs: number };
  database: DatabaseView;
}

const SLOWEST = 5;
/** Events that waited this long are a spike (the target's p99 is 100 ms, its max 500 ms). */
const SPIKE_MS = 250;
/** Slow events whose commits are closer than this belong to one spike. */
const SPIKE_GAP_MS = 200;
const LONG_PAUSE_MS = 50;

interface Interval {
  from: number;
  to: number;
  what: string;
}

/**
 * Lines up what one latency run recorded (the relay's rounds, both threads' pauses, the database's view, each
 * event's commit and publish times) and names, for the slowest rounds and for every latency spike, the evidence
 * that overlaps it in time, largest first. It names; it does not decide: a pause that overlaps is a suspect.
 */
export function stallReport(input: {
  startedAt: number;
  rounds: RoundTrace[];
  relay: ThreadPauses;
  endpoint: ThreadPauses;
  database: DatabaseView;
  /** Per event: epoch ms when its COMMIT returned and when the endpoint accepted it. */
  events: { committedAt: number; publishedAt: number }[];
  cpuMs?: StallReport["cpuMs"];
}): StallReport {
  const { startedAt, rounds } = input;
  const pauses = [
    ...threadIntervals("relay thread", input.relay),
    ...threadIntervals("SQS endpoint thread", input.endpoint),
  ];
  const database: Interval[] = input.database.conditions.map((c) => ({
    from: c.from - input.database.sampleEveryMs,
    to: c.to,
    what: c.what,
  }));
  const evidence = (from: number, to: number, own: { what: string; ms: number }[]) => {
    const items = [...own];
    for (const pause of pauses) {
      const ms = overlap(pause, from, to);
      if (ms > 0) items.push({ what: `${pause.what} ${Math.round(pause.to - pause.from)} ms`, ms });
    }
    const seen = new Set<string>();
    for (const condition of database) {
      if (overlap(condition, from, to) <= 0 && !(condition.from >= from && condition.from <= to)) continue;
      if (seen.has(condition.what)) continue;
      seen.add(condition.what);
      items.push({
        what: condition.what,
        ms: Math.max(0, Math.min(condition.to, to) - Math.max(condition.from, from)),
      });
    }
    return (
      items
        .sort((a, b) => b.ms - a.ms)
        .slice(0, 4)
        .map((item) => item.what)
        .join("; ") || "nothing overlapping"
    );
  };

  const slowestRounds = [...rounds]
    .sort((a, b) => roundMs(b) - roundMs(a))
    .slice(0, SLOWEST)
    .map((round): SlowRound => {
      const { startedAt: from, endedAt: to, rows, ...phases } = round;
      const top = dominantPhase(round);
      return {
        atMs: from - startedAt,
        totalMs: to - from,
        rows,
        phases,
        cause: evidence(from, to, [{ what: `${top.phase} ${Math.round(top.ms)} ms`, ms: top.ms }]),
      };
    });

  const slow = input.events
    .filter((event) => event.publishedAt - event.committedAt > SPIKE_MS)
    .sort((a, b) => a.committedAt - b.committedAt);
  const spikes: LatencySpike[] = [];
  let current: { from: number; to: number; lastPublish: number; events: number; maxMs: number } | undefined;
  const close = () => {
    if (current === undefined) return;
    const { from, to, lastPublish, events, maxMs } = current;
    // The rounds that were running while the spike's events waited, slowest first.
    const during = rounds
      .filter((round) => round.endedAt >= from && round.startedAt <= lastPublish)
      .sort((a, b) => roundMs(b) - roundMs(a));
    const worst = during[0];
    const own =
      worst === undefined
        ? [{ what: "no relay round ran meanwhile", ms: lastPublish - from }]
        : [
            {
              what: `slowest round ${Math.round(roundMs(worst))} ms (${dominantPhase(worst).phase} ${Math.round(dominantPhase(worst).ms)} ms) at +${Math.round(worst.startedAt - startedAt)} ms`,
              ms: roundMs(worst),
            },
          ];
    spikes.push({
      fromMs: from - startedAt,
      toMs: to - startedAt,
      events,
      maxMs,
      cause: evidence(from, lastPublish, own),
    });
    current = undefined;
  };
  for (const event of slow) {
    const latency = event.publishedAt - event.committedAt;
    if (current !== undefined && event.committedAt - current.to > SPIKE_GAP_MS) close();
    if (current === undefined) {
      current = { from: event.committedAt, to: event.committedAt, lastPublish: 0, events: 0, maxMs: 0 };
    }
    current.to = event.committedAt;
    current.lastPublish = Math.max(current.lastPublish, event.publishedAt);
    current.events++;
    current.maxMs = Math.max(current.maxMs, latency);
  }
  close();

  const phaseNames = ["connectMs", "txMs", "claimMs", "loadMs", "publishMs", "recordMs", "commitMs"] as const;
  const phases: StallReport["phases"] = {};
  for (const name of phaseNames) {
    const values = rounds.map((round) => round[name]);
    phases[name.replace(/Ms$/, "")] = { p99: percentile(values, 99), max: Math.max(0, ...values) };
  }
  const idle = rounds.flatMap((round) => (round.idleBeforeMs === undefined ? [] : [round.idleBeforeMs]));
  phases.idle = { p99: percentile(idle, 99), max: Math.max(0, ...idle) };
  phases.round = {
    p99: percentile(rounds.map(roundMs), 99),
    max: Math.max(0, ...rounds.map(roundMs)),
  };

  return {
    rounds: rounds.length,
    phases,
    slowestRounds,
    spikeThresholdMs: SPIKE_MS,
    spikes: spikes.sort((a, b) => b.maxMs - a.maxMs).slice(0, SLOWEST),
    relayThread: summarizePauses(input.relay, startedAt),
    endpointThread: summarizePauses(input.endpoint, startedAt),
    ...(input.cpuMs === undefined ? {} : { cpuMs: input.cpuMs }),
    database: input.database,
  };
}

/** A thread's late ticks and GC pauses as intervals (a late tick: the loop was blocked until `at`). */
function threadIntervals(thread: string, pauses: ThreadPauses): Interval[] {
  return [
    ...pauses.stalls.map((s) => ({ from: s.at - s.lateMs, to: s.at, what: `${thread} blocked` })),
    ...pauses.gc.map((g) => ({ from: g.at, to: g.at + g.ms, what: `${thread} ${g.kind} GC` })),
  ];
}

function summarizePauses(pauses: ThreadPauses, startedAt: number): PausesSummary {
  const long = [
    ...pauses.stalls
      .filter((s) => s.lateMs >= LONG_PAUSE_MS)
      .map((s) => ({ atMs: s.at - s.lateMs - startedAt, ms: s.lateMs, what: "event loop blocked" })),
    ...pauses.gc
      .filter((g) => g.ms >= LONG_PAUSE_MS)
      .map((g) => ({ atMs: g.at - startedAt, ms: g.ms, what: `${g.kind} GC` })),
  ].sort((a, b) => a.atMs - b.atMs);
  return {
    delayP99Ms: pauses.delayP99Ms,
    delayMaxMs: pauses.delayMaxMs,
    gcCount: pauses.gcCount,
    gcTotalMs: pauses.gcTotalMs,
    long,
    heapUsedMiB: pauses.heapUsedMiB,
  };
}

function overlap(interval: { from: number; to: number }, from: number, to: number): number {
  return Math.min(interval.to, to) - Math.max(interval.from, from);
}
