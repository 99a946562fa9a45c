import type { ProducerLoad } from "./producers.ts";

/**
 * How much each scenario writes. `full` (npm run test:chaos) is the acceptance size: 10,000 events over 250
 * aggregates, 40 per aggregate, written at 2,500/s so producers are still writing while the faults happen.
 * `ci` (CHAOS_PROFILE=ci, part of npm test) runs the same scenarios with fewer events.
 */
export const CHAOS_PROFILES = {
  full: { events: 10_000, aggregates: 250, writers: 5, eventsPerTransaction: 10, eventsPerSecond: 2_500 },
  ci: { events: 3_000, aggregates: 200, writers: 4, eventsPerTransaction: 10, eventsPerSecond: 1_500 },
} as const satisfies Record<string, ProducerLoad>;

export function chaosLoad(): ProducerLoad {
  const name = process.env.CHAOS_PROFILE ?? "full";
  if (name !== "full" && name !== "ci") throw new Error(`CHAOS_PROFILE must be full or ci, got ${name}`);
  return { ...CHAOS_PROFILES[name] };
}
