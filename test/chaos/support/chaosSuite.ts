import { afterAll, beforeAll, expect } from "vitest";
import { type FakeSqs, startFakeSqs } from "../../../cli/dev/aws/fakeSqs.ts";
import { type TestDatabase, useTestDatabase } from "../../support/db.ts";
import { chaosLoad } from "./profile.ts";
import { type ChaosContext, type ChaosReport, describeReport } from "./scenario.ts";

export interface ChaosEnvironment {
  db: TestDatabase;
  fake: FakeSqs;
}

/** A test file's database (cloned from the migrated template) and its own in-process SQS endpoint. */
export function useChaosEnvironment(): ChaosEnvironment {
  const environment = { db: useTestDatabase() } as ChaosEnvironment;
  beforeAll(async () => {
    environment.fake = await startFakeSqs();
  });
  afterAll(async () => {
    await environment.fake?.close();
  });
  return environment;
}

/**
 * The invariants every scenario must keep, whatever its faults: every committed event published, none lost,
 * none dead-lettered, first deliveries in seq order per aggregate, every duplicate dropped by FIFO
 * deduplication and caused by a fault, and no invocation overrunning its Lambda timeout.
 */
export function expectSurvived(report: ChaosReport): void {
  console.log(describeReport(report));
  expect(report.events).toBe(chaosLoad().events);
  expect(report.ledger.lost).toEqual([]);
  expect(report.ledger.orderViolations).toEqual([]);
  expect(report.table).toMatchObject({ published: report.events, pending: 0, dead: 0 });
  expect(report.fifoDeduplicated).toBe(report.ledger.duplicates);
  expect(report.unexplainedDuplicates).toEqual([]);
  expect(report.relays.hardTimeouts).toBe(0);
}

/** Resolves with `promise`, or fails naming `what` after `ms`: for waits on events that must happen. */
export function within<T>(what: string, ms: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A small deterministic PRNG (LCG), so a failing fault pattern can be replayed. */
export function seededRandom(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

/**
 * An SQS outage in both shapes the fake can refuse a request: connections reset, then 503s. Each lasts until the
 * relay has had `refusedPerMode` requests refused (an outage measured in the relay's attempts, not in time); the
 * endpoint is left down: the caller brings it back up.
 */
export async function refuseRequests(
  ctx: ChaosContext,
  refusedPerMode: number,
  timeoutMs: number,
): Promise<void> {
  for (const mode of ["reset", "unavailable"] as const) {
    const refusedBefore = ctx.fake.stats.failedRequests;
    ctx.fake.down(mode);
    await ctx.waitFor(
      `the relay to hit ${refusedPerMode} refused requests (${mode})`,
      () => ctx.fake.stats.failedRequests - refusedBefore >= refusedPerMode,
      timeoutMs,
    );
  }
}
