import { expect, it } from "vitest";
import { expectSurvived, seededRandom, useChaosEnvironment } from "./support/chaosSuite.ts";
import { runChaosScenario } from "./support/scenario.ts";

const env = useChaosEnvironment();

it("four relay processes at once, with random entry failures and throttling: per-aggregate order holds", async () => {
  const random = seededRandom(42);
  const report = await runChaosScenario(env.db.url, env.fake, {
    name: "four-relays",
    relays: 4,
    async chaos(ctx) {
      const endFault = ctx.beginFault("random entry failures and throttling");
      ctx.fake.setFaults({
        failEntry: () => (random() < 0.05 ? { code: "InternalError", senderFault: false } : false),
        throttle: (action) => action === "SendMessageBatch" && random() < 0.05,
      });
      await ctx.waitFor("every event written", () => ctx.written() >= ctx.load.events, 120_000);
      await ctx.waitFor("90% delivered", () => ctx.delivered() >= ctx.load.events * 0.9, 120_000);
      ctx.fake.resetFaults();
      endFault();
    },
  });

  expectSurvived(report);
  expect(report.relays.started).toBe(4);
  expect(env.fake.stats.failedEntries + env.fake.stats.throttled).toBeGreaterThan(100);
  expect(report.ledger.duplicates).toBe(0);
});
