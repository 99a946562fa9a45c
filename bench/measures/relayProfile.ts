import type pg from "pg";
import type { BacklogShape } from "../lib/benchDatabase.ts";
import type { CpuMeter } from "../lib/cpuMeter.ts";
import { type ProfileShare, profileThread } from "../lib/cpuProfile.ts";
import type { BenchSqsEndpoint } from "../lib/sqsEndpoint.ts";
import { measureRelay, type RelayTuning } from "./relayThroughput.ts";

export interface RelayProfile {
  tuning: RelayTuning;
  eventsPerSecond: number;
  /** The relay thread's busy CPU per event, µs, and its split by package. */
  busyUsPerEvent: number;
  shares: ProfileShare[];
}

/**
 * One relay run at zero latency under the CPU profiler: where the relay's own thread spends its time. An
 * unprofiled run first, so the profile shows optimized code rather than the JIT warming up.
 */
export async function profileRelay(
  pool: pg.Pool,
  endpoint: BenchSqsEndpoint,
  shape: BacklogShape,
  tuning: RelayTuning,
  meter: CpuMeter,
): Promise<RelayProfile> {
  await measureRelay(pool, endpoint, shape, tuning, 0, meter);
  const { result, busyUsPerEvent, shares } = await profileThread(
    () => measureRelay(pool, endpoint, shape, tuning, 0, meter),
    () => shape.events,
  );
  return { tuning, eventsPerSecond: result.eventsPerSecond, busyUsPerEvent, shares };
}
