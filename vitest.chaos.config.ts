import { defineConfig } from "vitest/config";

/**
 * The chaos suite (test/chaos): ledger-checked fault scenarios with relay child processes. One file at a time:
 * each scenario loads both cores (producers, relays, Postgres, the SQS endpoint) and one Postgres scenario
 * restarts its own server. CHAOS_PROFILE=ci runs the same scenarios with fewer events.
 */
export default defineConfig({
  test: {
    include: ["test/chaos/**/*.chaos.ts"],
    globalSetup: ["test/chaos/support/globalSetup.ts"],
    fileParallelism: false,
    testTimeout: 240_000,
    hookTimeout: 120_000,
  },
});
