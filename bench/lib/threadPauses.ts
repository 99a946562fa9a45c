import { constants, monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks";
import { getHeapStatistics } from "node:v8";

/** Epoch milliseconds with sub-millisecond precision, comparable across threads (each has its own timeOrigin). */
export const epochNow = () => performance.timeOrigin + performance.now();

/** One thread's own pauses over a measurement: when its event loop could not run, and its GC pauses. */
export interface ThreadPauses {
  /** monitorEventLoopDelay over the whole watch (10 ms resolution), ms. */
  delayP99Ms: number;
  delayMaxMs: number;
  /** Ticks of a 20 ms interval that came more than 50 ms late: when (epoch ms, tick end) and by how much. */
  stalls: { at: number; lateMs: number }[];
  /** Every GC pause of 5 ms or more (epoch ms at its start), and the totals of all of them. */
  gc: { at: number; ms: number; kind: string }[];
  gcCount: number;
  gcTotalMs: number;
  /** V8 heap in use when the watch started and ended, MiB: a heap that grows across runs makes GCs longer. */
  heapUsedMiB: { start: number; end: number };
}

const TICK_MS = 20;
const LATE_MS = 50;
const GC_SHOWN_MS = 5;
const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MAJOR]: "major",
  [constants.NODE_PERFORMANCE_GC_MINOR]: "minor",
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: "incremental",
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: "weakcb",
};

const heapMiB = () => getHeapStatistics().used_heap_size / 1_048_576;

/**
 * Watches the calling thread (the relay's, or the SQS endpoint's worker) until `stop()`: the event-loop delay
 * histogram, a timer that notes every tick that came late (so a pause has a time to line up with the rounds and
 * the database's view), and the GC pauses from PerformanceObserver. The watch itself costs a timer every 20 ms.
 */
export function watchThread(): { stop(): ThreadPauses } {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  const stalls: ThreadPauses["stalls"] = [];
  const gc: ThreadPauses["gc"] = [];
  let gcCount = 0;
  let gcTotalMs = 0;
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gcCount++;
      gcTotalMs += entry.duration;
      if (entry.duration < GC_SHOWN_MS) continue;
      const kind = (entry as { detail?: { kind?: number } }).detail?.kind ?? -1;
      gc.push({
        at: performance.timeOrigin + entry.startTime,
        ms: entry.duration,
        kind: GC_KINDS[kind] ?? String(kind),
      });
    }
  });
  observer.observe({ entryTypes: ["gc"] });
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const late = now - last - TICK_MS;
    if (late > LATE_MS) stalls.push({ at: performance.timeOrigin + now, lateMs: late });
    last = now;
  }, TICK_MS);
  const heapStart = heapMiB();
  return {
    stop() {
      clearInterval(timer);
      observer.disconnect();
      histogram.disable();
      return {
        delayP99Ms: histogram.percentile(99) / 1e6,
        delayMaxMs: histogram.max / 1e6,
        stalls,
        gc,
        gcCount,
        gcTotalMs,
        heapUsedMiB: { start: heapStart, end: heapMiB() },
      };
    },
  };
}
