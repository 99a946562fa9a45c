import { expect, it } from "vitest";
import { expectSurvived, refuseRequests, useChaosEnvironment } from "./support/chaosSuite.ts";
import { runChaosScenario } from "./support/scenario.ts";

const env = useChaosEnvironment();
/** Refused requests per outage mode before SQS comes back: several rounds of every relay, SDK retries included. */
const REFUSED_PER_MODE = 30;

it("SQS fails every request for a while (connections reset, then 503s), then recovers: nothing lost, order kept", async () => {
  const report = await runChaosScenario(env.db.url, env.fake, {
    name: "sqs-outage",
    relays: 1,
    async chaos(ctx) {
      await ctx.waitFor("30% written", () => ctx.written() >= ctx.load.events * 0.3, 60_000);
      const endFault = ctx.beginFault("SQS outage");
      await refuseRequests(ctx, REFUSED_PER_MODE, 30_000);
      // Producers keep committing through the outage; the backlog must drain after it.
      await ctx.waitFor(
        "60% written during the outage",
        () => ctx.written() >= ctx.load.events * 0.6,
        60_000,
      );
      ctx.fake.up();
      endFault();
    },
  });

  expectSurvived(report);
  expect(report.relays.failedEntries).toBeGreaterThan(0); // rows really went through failed attempts and backoff
  expect(report.ledger.duplicates).toBe(0); // a refused request delivers nothing, so nothing repeats
});
