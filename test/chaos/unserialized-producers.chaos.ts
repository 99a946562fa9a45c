import { expect, it } from "vitest";
import { expectSurvived, useChaosEnvironment, within } from "./support/chaosSuite.ts";
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
      for (const share of KILLS_AT) {
        await ctx.waitFor(
          `${share * 100}% delivered`,
          () => ctx.delivered() >= ctx.load.events * share,
          120_000,
        );
        // Killed inside a SendMessageBatch that the endpoint accepts: the batch is re-sent by another relay.
        let endFault = () => {};
        const killed = new Promise<void>((resolve) => {
          ctx.fake.setFaults({
            latencyMs: (action) => {
              if (action !== "SendMessageBatch") return 0;
              ctx.fake.setFaults({ latencyMs: 0 });
              endFault = ctx.beginFault("a relay SIGKILLed mid-batch, then restarted");
              void ctx.fleet.killOne().then(resolve);
              return 0;
            },
          });
        });
        await within("a relay to be killed mid-batch", 30_000, killed);
        await ctx.fleet.start();
        endFault();
      }
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
