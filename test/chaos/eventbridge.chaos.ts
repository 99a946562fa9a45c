import { expect, it } from "vitest";
import { expectSurvived, seededRandom, useChaosEnvironment } from "./support/chaosSuite.ts";
import { runChaosScenario } from "./support/scenario.ts";

const env = useChaosEnvironment();

it("EventBridge: entry failures, throttling, then the bus unreachable: nothing lost, nothing dead-lettered, sent in order", async () => {
  const random = seededRandom(13);
  const report = await runChaosScenario(env.db.url, env.fake, {
    name: "eventbridge",
    destination: "eventbridge",
    relays: 2,
    async chaos(ctx) {
      await ctx.waitFor("10% written", () => ctx.written() >= ctx.load.events * 0.1, 60_000);

      const endEntries = ctx.beginFault("bus fails 10% of entries (throttled or internal)");
      ctx.fake.events.failEntry = () => {
        const roll = random();
        if (roll >= 0.1) return false;
        return { code: roll < 0.05 ? "ThrottlingException" : "InternalFailure" };
      };
      const failedBefore = ctx.fake.events.stats.failedEntries;
      await ctx.waitFor(
        "100 entries failed",
        () => ctx.fake.events.stats.failedEntries - failedBefore >= 100,
        60_000,
      );
      ctx.fake.events.failEntry = false;
      endEntries();

      const endThrottle = ctx.beginFault("bus throttles half the PutEvents requests");
      const throttledBefore = ctx.fake.stats.throttled;
      ctx.fake.setFaults({ throttle: (action) => action === "PutEvents" && random() < 0.5 });
      await ctx.waitFor(
        "50 requests throttled",
        () => ctx.fake.stats.throttled - throttledBefore >= 50,
        60_000,
      );
      ctx.fake.resetFaults();
      endThrottle();

      const endOutage = ctx.beginFault("bus unreachable");
      ctx.fake.down();
      const refusedBefore = ctx.fake.stats.failedRequests;
      // Long enough for every relay loop to back off and retry several times.
      await ctx.waitFor(
        "40 requests refused",
        () => ctx.fake.stats.failedRequests - refusedBefore >= 40,
        60_000,
      );
      ctx.fake.up();
      endOutage();
      await ctx.waitFor("every event written", () => ctx.written() >= ctx.load.events, 120_000);
    },
  });

  expectSurvived(report);
  expect(env.fake.events.stats.failedEntries).toBeGreaterThanOrEqual(100);
  expect(report.relays.failedEntries).toBeGreaterThan(0); // the faults hit rows, which retried and got through
  // Nothing repeated: a failed entry, a throttled or refused request delivers nothing to the bus.
  expect(report.ledger.duplicates).toBe(0);
});
