import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type FakeSqs, startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import { migrate } from "../../functions/shared/db/migrate.ts";
import { type LocalPostgres, startPostgres } from "../../local/backends/postgres.ts";
import { expectSurvived } from "./support/chaosSuite.ts";
import { runChaosScenario } from "./support/scenario.ts";

/**
 * This file restarts its Postgres, so it has one of its own, embedded even where Docker answers: only that server
 * can restart on the same port and data directory (the shared one serves other files).
 */
let server: LocalPostgres;
let fake: FakeSqs;
const RESTARTS_AT = [0.3, 0.65];

beforeAll(async () => {
  server = await startPostgres(undefined, { backend: "embedded" });
  if (server.restart === undefined) {
    throw new Error(
      `the Postgres restart scenario needs an embedded server (restart()), got ${server.source}`,
    );
  }
  // Two sessions: the runner holds a create-index-concurrently file's lock on a second one (functions/shared/db/migrate.ts).
  const pool = new pg.Pool({ connectionString: server.url, max: 2 });
  await migrate(pool);
  await pool.end();
  fake = await startFakeSqs();
});
afterAll(async () => {
  await fake?.close();
  await server?.stop();
});

it("Postgres restarted twice under load: producers and relays ride through, nothing lost, order kept", async () => {
  const report = await runChaosScenario(server.url, fake, {
    name: "postgres-restart",
    relays: 2,
    async chaos(ctx) {
      for (const share of RESTARTS_AT) {
        await ctx.waitFor(`${share * 100}% written`, () => ctx.written() >= ctx.load.events * share, 60_000);
        const endFault = ctx.beginFault("Postgres restart");
        const producerRetries = ctx.producers.stats.retries;
        const relayFailures = ctx.fleet.stats.failedRounds;
        // Fast shutdown ends every session; the server stays down until both sides have noticed.
        await server.restart?.(() =>
          ctx.waitFor(
            "a producer and a relay to fail against the stopped server",
            () =>
              ctx.producers.stats.retries > producerRetries && ctx.fleet.stats.failedRounds > relayFailures,
            30_000,
          ),
        );
        endFault();
      }
    },
  });

  expectSurvived(report);
  expect(report.producers.retries).toBeGreaterThan(0);
  expect(report.relays.failedRounds).toBeGreaterThan(0);
});
