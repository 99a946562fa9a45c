import { defineConfig } from "vitest/config";

/**
 * `npm run test:retention`: the suites that read what publishing leaves behind, again with OUTBOX_RETENTION=delete
 * (set by the script; test/support/relay.ts and the chaos relays read it), where the relay deletes the rows it
 * publishes (migration 0011). The main suite runs them in the default mode, `keep`; tests whose outcome differs by
 * mode (the purge, the relay handler's published counts, redrive's "overtaken", the order-key's highest seq) also
 * run both modes there, explicitly.
 *
 * - The order tests, conformance, faults, isolation (one bad row among deleted ones, in the one record
 *   statement), the relay handler, redrive, the purge, the metrics: every per-row assertion on a published
 *   event, in the mode where that row is gone.
 *   The destination tests (EventBridge, routing, the claim check) and tracing pass in `delete` too, but are left
 *   out: the record statement they reach is the one the relay tests above run, and the claim check's 40 MiB
 *   payloads would add about 10 s.
 * - Five chaos scenarios, with CHAOS_PROFILE=ci (3,000 events each), where deleting on publish could lose or
 *   repeat an event: a relay SIGKILLed between SQS accepting a batch and its commit (the rolled-back delete must
 *   leave the rows to re-send), four relays at once (their rounds meet on the counters row), Postgres restarted
 *   under load (rounds' deletes cut off mid-transaction), an SQS outage and failing single entries (failed rows
 *   stay as rows while the rest of their round's rows are deleted, in one statement). The other five (EventBridge,
 *   unserialized producers, Lambda deadlines, throttling, a long outage) reach the record statement by the same
 *   paths as these, through another destination, the producers, the invocation's deadline or whole-request
 *   failures, which the mode does not change; all ten pass in `delete` at the full profile (about 145 s on 2 cores).
 *
 * Two projects, run one after the other (groupOrder): the chaos scenarios load both cores and must not share them.
 * About 75 s on 2 cores (CONTRIBUTING.md, "Retention modes").
 */
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "retention",
          include: [
            "test/relay/order*.test.ts",
            "test/relay/conformance.test.ts",
            "test/relay/faults.test.ts",
            "test/relay/isolation.test.ts",
            "test/relay/handler.test.ts",
            "test/operate/**/*.test.ts",
            "test/purge/**/*.test.ts",
            "test/observe/metrics.test.ts",
          ],
          globalSetup: ["test/support/globalSetup.ts"],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          name: "retention-chaos",
          include: [
            "test/chaos/relay-killed.chaos.ts",
            "test/chaos/four-relays.chaos.ts",
            "test/chaos/postgres-restart.chaos.ts",
            "test/chaos/sqs-outage.chaos.ts",
            "test/chaos/entry-failures.chaos.ts",
          ],
          globalSetup: ["test/chaos/support/globalSetup.ts"],
          fileParallelism: false,
          testTimeout: 240_000,
          hookTimeout: 120_000,
          sequence: { groupOrder: 1 },
        },
      },
    ],
    // Two cores: more workers only queue on the CPU and on the one Postgres (vitest.config.ts).
    maxWorkers: 3,
  },
});
