import { expect, it } from "vitest";
import { expectSurvived, seededRandom, useChaosEnvironment } from "./support/chaosSuite.ts";
import { runChaosScenario } from "./support/scenario.ts";

const env = useChaosEnvironment();
/** Throttled answers per error code before the throttling stops. */
const THROTTLES_PER_CODE = 25;

it("SQS throttles half the SendMessageBatch requests for a while, with both throttling errors: nothing lost, nothing dead-lettered", async () => {
  const random = seededRandom(7);
  const report = await runChaosScenario(env.db.url, env.fake, {
    name: "sqs-throttling",
    relays: 1,
    async chaos(ctx) {
      await ctx.waitFor("10% written", () => ctx.written() >= ctx.load.events * 0.1, 60_000);
      const endFault = ctx.beginFault("SQS throttling");
      // Both throttling answers SQS gives: the documented ThrottlingException, then the modelled RequestThrottled.
      for (const code of ["ThrottlingException", "RequestThrottled"] as const) {
        const before = ctx.fake.stats.throttled;
        ctx.fake.setFaults({
          throttleCode: code,
          throttle: (action) => action === "SendMessageBatch" && random() < 0.5,
        });
        await ctx.waitFor(
          `${THROTTLES_PER_CODE} requests throttled with ${code}`,
          () => ctx.fake.stats.throttled - before >= THROTTLES_PER_CODE,
          60_000,
        );
      }
      ctx.fake.resetFaults();
      endFault();
    },
  });

  expectSurvived(report);
  expect(env.fake.stats.throttled).toBeGreaterThanOrEqual(2 * THROTTLES_PER_CODE);
  expect(report.ledger.duplicates).toBe(0); // a throttled request delivers nothing
});
