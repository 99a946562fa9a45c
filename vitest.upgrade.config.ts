import { defineConfig } from "vitest/config";

/**
 * The upgrade-in-place test (test/upgrade.test.ts) on its own: it loads a million-row table and keeps producers
 * and a relay busy for a minute or more, which, beside the main suite's files, starves their deadline-bound tests
 * on 2 cores. `npm test` runs it after the main suite, `npm run test:upgrade:large` at 5M rows.
 */
export default defineConfig({
  test: {
    include: ["test/upgrade.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 900_000,
    hookTimeout: 120_000,
  },
});
