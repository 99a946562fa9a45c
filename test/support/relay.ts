import type { SQSClient } from "@aws-sdk/client-sqs";
import type pg from "pg";
import { DEFAULT_RELAY_OPTIONS, type RelayOptions, runRelay } from "../../functions/shared/relay.ts";

/** Options for tests: fast backoff and short timeouts so failure paths finish in milliseconds. */
export function testRelayOptions(queueUrl: string, overrides: Partial<RelayOptions> = {}): RelayOptions {
  return {
    ...DEFAULT_RELAY_OPTIONS,
    queueUrl,
    mode: "drain",
    backoffBaseMs: 1,
    backoffMaxMs: 5,
    publishTimeoutMs: 5_000,
    statementTimeoutMs: 2_000,
    // One loop, so tests can count rounds exactly; parallel rounds have tests of their own.
    parallelRounds: 1,
    ...overrides,
  };
}

/** Runs the relay until nothing is claimable (drain mode), with a generous deadline. */
export function drain(pool: pg.Pool, sqs: SQSClient, options: RelayOptions) {
  return runRelay({ pool, sqs, deadline: Date.now() + 60_000 }, { ...options, mode: "drain" });
}

/** Drains repeatedly until no row is pending (rows in short backoff become claimable again). */
export async function drainUntilEmpty(pool: pg.Pool, sqs: SQSClient, options: RelayOptions, maxRuns = 200) {
  for (let run = 0; run < maxRuns; run++) {
    await drain(pool, sqs, options);
    const { rows } = await pool.query(
      "select count(*)::int as n from outbox_events where processed_at is null and dead_lettered_at is null",
    );
    if (rows[0].n === 0) return run + 1;
    // Backoff in tests is 1-5 ms; wait for the earliest retry time rather than spinning.
    await pool.query(
      "select pg_sleep(greatest(0, extract(epoch from min(available_at) - clock_timestamp()))) from outbox_events where processed_at is null and dead_lettered_at is null",
    );
  }
  throw new Error(`outbox not drained after ${maxRuns} runs`);
}
