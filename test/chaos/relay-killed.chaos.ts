import { expect, it } from "vitest";
import { expectSurvived, useChaosEnvironment, within } from "./support/chaosSuite.ts";
import { CHAOS_ROWS_IN_FLIGHT_PER_RELAY, runChaosScenario } from "./support/scenario.ts";

const env = useChaosEnvironment();
const KILLS_AT = [0.2, 0.45, 0.7];

it("relay SIGKILLed mid-batch and restarted, three times: nothing lost, order kept, re-sends deduplicated", async () => {
  const report = await runChaosScenario(env.db.url, env.fake, {
    name: "relay-sigkill",
    relays: 1,
    async chaos(ctx) {
      for (const share of KILLS_AT) {
        await ctx.waitFor(
          `${share * 100}% delivered`,
          () => ctx.delivered() >= ctx.load.events * share,
          60_000,
        );
        // The kill lands inside a SendMessageBatch: the endpoint accepts the batch (the body is already in), the
        // relay never hears back and never records it; its transaction dies with the process.
        let endFault = () => {};
        const killed = new Promise<void>((resolve) => {
          ctx.fake.setFaults({
            latencyMs: (action) => {
              if (action !== "SendMessageBatch") return 0;
              ctx.fake.setFaults({ latencyMs: 0 });
              endFault = ctx.beginFault("relay SIGKILLed mid-batch, then restarted");
              void ctx.fleet.killOne().then(resolve);
              return 0;
            },
          });
        });
        await within("the relay to be killed mid-batch", 30_000, killed);
        await ctx.fleet.start();
        endFault();
      }
    },
  });

  expectSurvived(report);
  expect(report.relays.killed).toBe(KILLS_AT.length);
  expect(report.relays.started).toBe(KILLS_AT.length + 1);
  // Each killed round's accepted messages were claimed again and re-sent with the same deduplication ids. A kill
  // can catch every parallel round of the relay with its batch accepted but not recorded, hence the bound.
  expect(report.ledger.duplicates).toBeGreaterThan(0);
  expect(report.ledger.duplicates).toBeLessThanOrEqual(KILLS_AT.length * CHAOS_ROWS_IN_FLIGHT_PER_RELAY);
});
