import { SQSClient } from "@aws-sdk/client-sqs";
import type pg from "pg";
import type { Destination } from "../../functions/shared/destinations/destination.ts";
import { sqsFifoDestination } from "../../functions/shared/destinations/sqs/sqsFifo.ts";
import {
  DEFAULT_RELAY_OPTIONS,
  type RelayOptions,
  roundReserveMs,
  runRelay,
} from "../../functions/shared/relay/engine.ts";
import { RELAY_SETTINGS } from "../../functions/shared/relay/settings.ts";
import { readChoice } from "../../functions/shared/util/settings.ts";

/** Options for tests: fast backoff and short timeouts so failure paths finish in milliseconds. */
export interface TestRelayOptions extends RelayOptions {
  /** The queue the test publishes to (drain builds the SQS FIFO destination from it). */
  queueUrl: string;
  maxMessageBytes?: number;
}

/**
 * The retention mode tests relay in: OUTBOX_RETENTION, read through the relay's own settings row, so every suite
 * that relays through these helpers runs in either mode (`OUTBOX_RETENTION=delete npx vitest run ...`).
 */
export const TEST_RETENTION = readChoice(process.env, RELAY_SETTINGS.retention);

export function testRelayOptions(
  queueUrl: string,
  overrides: Partial<TestRelayOptions> = {},
): TestRelayOptions {
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
    retention: TEST_RETENTION,
    ...overrides,
  };
}

/** The SQS FIFO destination a test's options name. */
export function queueDestination(sqs: SQSClient, options: { queueUrl: string; maxMessageBytes?: number }) {
  return sqsFifoDestination(sqs, {
    queueUrl: options.queueUrl,
    ...(options.maxMessageBytes === undefined ? {} : { maxMessageBytes: options.maxMessageBytes }),
  });
}

type Target = SQSClient | Destination;

function destinationOf(target: Target, options: RelayOptions): Destination {
  if (!(target instanceof SQSClient)) return target;
  const { queueUrl, maxMessageBytes } = options as Partial<TestRelayOptions>;
  if (queueUrl === undefined) throw new Error("testRelayOptions(queueUrl) is needed to publish to a queue");
  return queueDestination(target, {
    queueUrl,
    ...(maxMessageBytes === undefined ? {} : { maxMessageBytes }),
  });
}

/** Runs the relay until nothing is claimable (drain mode), with a generous deadline: a minute past one round's reserve. */
export function drain(pool: pg.Pool, target: Target, options: RelayOptions) {
  return runRelay(
    {
      pool,
      destination: destinationOf(target, options),
      deadline: Date.now() + roundReserveMs(options) + 60_000,
    },
    { ...options, mode: "drain" },
  );
}

/** Drains repeatedly until no row is pending (rows in short backoff become claimable again). */
export async function drainUntilEmpty(pool: pg.Pool, target: Target, options: RelayOptions, maxRuns = 200) {
  for (let run = 0; run < maxRuns; run++) {
    await drain(pool, target, options);
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
