import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Run by itself after the suite (vitest.upgrade.config.ts): its million-row load would starve the others.
    exclude: [...configDefaults.exclude, "test/upgrade.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Two cores: more workers only queue on the CPU and on the one Postgres.
    maxWorkers: 3,
  },
});
