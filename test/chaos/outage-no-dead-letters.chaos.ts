import { expect, it } from "vitest";
import { expectSurvived, refuseRequests, seededRandom, useChaosEnvironment } from "./support/chaosSuite.ts";
import { runChaosScenario } from "./support/scenario.ts";

const env = useChaosEnvironment();

/** Few attempts and a short backoff cap, so the outage outlasts RELAY_MAX_ATTEMPTS × the cap many times over. */
const MAX_ATTEMPTS = 3;
const BACKOFF_MAX_MS = 100;
/**
 * Refused requests per outage mode: the claimable heads (200-250 aggregates) fit in ~25 requests, each tried
 * up to 3 times by the SDK, so this many refusals means every head has failed well over MAX_ATTEMPTS times.
 */
const REFUSED_PER_MODE = 1_000;

it("an SQS outage longer than max attempts × backoff cap, then server-side entry errors: 0 dead letters, order kept", async () => {
  const random = seededRandom(17);
  const report = await runChaosScenario(env.db.url, env.fake, {
    name: "outage-no-dead-letters",
    relays: 1,
    relayEnv: {
      RELAY_MAX_ATTEMPTS: String(MAX_ATTEMPTS),
      RELAY_BACKOFF_BASE_MS: "20",
      RELAY_BACKOFF_MAX_MS: String(BACKOFF_MAX_MS),
    },
    async chaos(ctx) {
      await ctx.waitFor("20% written", () => ctx.written() >= ctx.load.events * 0.2, 60_000);
      const endOutage = ctx.beginFault("SQS outage");
      const outageStarted = Date.now();
      await refuseRequests(ctx, REFUSED_PER_MODE, 90_000);
      const outageMs = Date.now() - outageStarted;
      ctx.fake.up();
      endOutage();
      expect(outageMs).toBeGreaterThan(MAX_ATTEMPTS * BACKOFF_MAX_MS);

      // Recovery is rough: SQS fails single entries on its side (SenderFault = false). None of this is the
      // message's fault, so none of it may count towards RELAY_MAX_ATTEMPTS.
      const endEntryErrors = ctx.beginFault("server-side entry errors");
      ctx.fake.setFaults({
        failEntry: () => {
          const draw = random();
          if (draw < 0.1) return { code: "InternalError", senderFault: false };
          if (draw < 0.15) return { code: "ServiceUnavailable", senderFault: false };
          return false;
        },
      });
      await ctx.waitFor("every event written", () => ctx.written() >= ctx.load.events, 120_000);
      await ctx.waitFor("90% delivered", () => ctx.delivered() >= ctx.load.events * 0.9, 120_000);
      ctx.fake.resetFaults();
      endEntryErrors();
    },
  });

  expectSurvived(report); // includes 0 dead letters and 0 order violations
  expect(report.relays.failedEntries).toBeGreaterThan(0); // heads really failed, many times each, during the outage
  expect(env.fake.stats.failedEntries).toBeGreaterThan(report.events * 0.05);
  expect(report.ledger.duplicates).toBe(0);
});
