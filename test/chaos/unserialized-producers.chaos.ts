import { expect, it } from "vitest";
import { expectSurvived, useChaosEnvironment } from "./support/chaosSuite.ts";
import { killRelaysMidBatch } from "./support/killMidBatch.ts";
import { CHAOS_ROWS_IN_FLIGHT_PER_RELAY, runChaosScenario } from "./support/scenario.ts";

const env = useChaosEnvironment();
const KILLS_AT = [0.3, 0.6];
/** Few aggregates, shared by every writer: transactions of one aggregate overlap all the time. */
const AGGREGATES = 40;

it("unserialized producers racing on shared aggregates, three relays, two SIGKILLs: order is commit order, nothing lost", async () => {
  const report = await runChaosScenario(env.db.url, env.fake, {
    name: "unserialized-producers",
    relays: 3,
    // Half the writers enqueue several events for random aggregates per transaction (one call: canonical lock
    // order), half insert plain SQL for one random aggregate; every transaction stays open for up to 20 ms
    // before COMMIT, so without the commit-order trigger a later seq often commits, and is published, first.
    producers: { aggregates: AGGREGATES, unserialized: true, maxHoldMs: 20 },
    async chaos(ctx) {
      await killRelaysMidBatch(ctx, KILLS_AT, "a relay SIGKILLed mid-batch, then restarted", 120_000);
    },
  });

  expectSurvived(report);
  expect(report.aggregates).toBe(AGGREGATES);
  expect(report.relays.killed).toBe(KILLS_AT.length);
  expect(report.relays.started).toBe(3 + KILLS_AT.length);
  // Every transaction locked its aggregates in one canonical order: no deadlock (40P01) had to be retried.
  expect(report.producers.retries).toBe(0);
  expect(report.ledger.duplicates).toBeLessThanOrEqual(KILLS_AT.length * CHAOS_ROWS_IN_FLIGHT_PER_RELAY);
});
