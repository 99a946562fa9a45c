import { expect, it } from "vitest";
import { expectSurvived, seededRandom, useChaosEnvironment } from "./support/chaosSuite.ts";
import { runChaosScenario } from "./support/scenario.ts";

const env = useChaosEnvironment();

it("SQS rejects random single entries of batches (10%, retryable): the rest flows, order kept, nothing lost", async () => {
  const random = seededRandom(11);
  const report = await runChaosScenario(env.db.url, env.fake, {
    name: "entry-failures",
    relays: 1,
    async chaos(ctx) {
      const endFault = ctx.beginFault("random entry failures");
      ctx.fake.setFaults({
        failEntry: () => (random() < 0.1 ? { code: "InternalError", senderFault: false } : false),
      });
      await ctx.waitFor("every event written", () => ctx.written() >= ctx.load.events, 120_000);
      await ctx.waitFor("90% delivered", () => ctx.delivered() >= ctx.load.events * 0.9, 120_000);
      ctx.fake.resetFaults();
      endFault();
    },
  });

  expectSurvived(report);
  expect(env.fake.stats.failedEntries).toBeGreaterThan(report.events * 0.05);
  expect(report.relays.failedEntries).toBeGreaterThan(report.events * 0.05);
  expect(report.ledger.duplicates).toBe(0); // a failed entry was not accepted, so its retry is its first delivery
});
