import { expect, it } from "vitest";
import { expectSurvived, seededRandom, useChaosEnvironment } from "./support/chaosSuite.ts";
import { runChaosScenario } from "./support/scenario.ts";

const env = useChaosEnvironment();
const INVOCATIONS = 6;

/**
 * Lambda-like invocations of 3 s (the worker SIGKILLs itself if one overruns, as Lambda resets a runtime), with
 * publish timeout 600 ms and statement timeout 300 ms: a round needs a 1.5 s reserve (600 + 3 x 300), so each
 * invocation claims for about 1.3 s and then must stop mid-backlog. SQS answers in 0-60 ms, so rounds are in flight when the
 * budget runs out.
 */
it("repeated short Lambda invocations end at their deadline mid-backlog: no overrun, nothing lost, no re-sends", async () => {
  const random = seededRandom(3);
  const report = await runChaosScenario(env.db.url, env.fake, {
    name: "lambda-deadline",
    relays: 1,
    relayEnv: {
      CHAOS_INVOCATION_MS: "3000",
      RELAY_BUDGET_MARGIN_MS: "200",
      RELAY_PUBLISH_TIMEOUT_MS: "600",
      RELAY_STATEMENT_TIMEOUT_MS: "300",
    },
    async chaos(ctx) {
      const endFault = ctx.beginFault("SQS latency 0-60 ms");
      ctx.fake.setFaults({ latencyMs: () => Math.floor(random() * 60) });
      await ctx.waitFor(
        `${INVOCATIONS} invocations stopped by their deadline`,
        () => (ctx.fleet.stats.invocationsByStop.deadline ?? 0) >= INVOCATIONS,
        60_000,
      );
      await ctx.waitFor("every event written", () => ctx.written() >= ctx.load.events, 60_000);
      ctx.fake.resetFaults();
      endFault();
    },
  });

  expectSurvived(report);
  expect(report.relays.invocationsByStop.deadline).toBeGreaterThanOrEqual(INVOCATIONS);
  expect(report.relays.hardTimeouts).toBe(0);
  // Every round finished before its invocation's deadline, so none was cut between publish and record.
  expect(report.ledger.duplicates).toBe(0);
});
