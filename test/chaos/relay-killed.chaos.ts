import { expect, it } from "vitest";
import { expectSurvived, useChaosEnvironment } from "./support/chaosSuite.ts";
import { killRelaysMidBatch } from "./support/killMidBatch.ts";
import { CHAOS_ROWS_IN_FLIGHT_PER_RELAY, runChaosScenario } from "./support/scenario.ts";

const env = useChaosEnvironment();
const KILLS_AT = [0.2, 0.45, 0.7];

it("relay SIGKILLed mid-batch and restarted, three times: nothing lost, order kept, re-sends deduplicated", async () => {
  const report = await runChaosScenario(env.db.url, env.fake, {
    name: "relay-sigkill",
    relays: 1,
    async chaos(ctx) {
      await killRelaysMidBatch(ctx, KILLS_AT, "relay SIGKILLed mid-batch, then restarted", 60_000);
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
