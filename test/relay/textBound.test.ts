import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { queryTimeoutFor } from "../../functions/shared/db/connection.ts";
import { DEFAULT_RELAY_OPTIONS, roundReserveMs, runRelay } from "../../functions/shared/relay/engine.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { queueDestination } from "../support/relay.ts";
import { createFifoQueue, receiveAll, sqsClient } from "../support/sqs.ts";

/**
 * Issue 21, finding 1: `[1e131000, ... x 7000]` is stored in ~1.9 KB and prints as 917 MB; the print ignores
 * statement_timeout. Before 0006 the relay printed it, the client timed out, the backend kept printing with the
 * claim's row locks, and 0 of 3 healthy rows were published in an invocation that reported success.
 */
const db = useTestDatabase();
const sqs = sqsClient();
// Built as text and parsed by jsonb_in (fast): building it in SQL (jsonb_agg) would print every number.
const POISON = `[${Array.from({ length: 7000 }, () => "1e131000").join(", ")}]`;

let relayPool: pg.Pool;
beforeAll(() => {
  // The production pool's client-side timeout (functions/relay/handler.ts), so a statement the server does not
  // answer in time is given up on as in the Lambda.
  relayPool = new pg.Pool({
    connectionString: db.url,
    max: DEFAULT_RELAY_OPTIONS.parallelRounds,
    query_timeout: queryTimeoutFor(DEFAULT_RELAY_OPTIONS.statementTimeoutMs),
  });
  relayPool.on("error", () => {});
});
afterAll(() => relayPool.end());
beforeEach(() => db.pool.query("delete from outbox_events"));

describe("a row whose JSON text cannot be bounded by its stored size", () => {
  it("is refused at insert, without printing it, naming the limit", async () => {
    const started = performance.now();
    const insert = db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
       values ('Poison', 'poison-1', 'poison.inserted', $1::jsonb)`,
      [POISON],
    );
    await expect(insert).rejects.toMatchObject({
      code: "23514",
      message: expect.stringMatching(/payload: its JSON text could be up to \d+ bytes, over 1572864/),
    });
    // The bound takes ~0.2 s; printing it would take 17 s or more.
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it("inserted around the trigger, is dead-lettered unprinted and the healthy rows go out in one invocation (production defaults)", async () => {
    // A restore with triggers disabled (pg_restore --disable-triggers) or a row older than 0006.
    await db.pool.query("alter table outbox_events disable trigger outbox_commit_order");
    const {
      rows: [poison],
    } = await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
       values ('Poison', 'poison-1', 'poison.inserted', $1::jsonb) returning id`,
      [POISON],
    );
    await db.pool.query("alter table outbox_events enable always trigger outbox_commit_order");
    const healthy = await enqueueCommitted(db.pool, [anEvent(), anEvent(), anEvent()]);
    const queueUrl = await createFifoQueue(sqs, "text-bound");

    const options = { ...DEFAULT_RELAY_OPTIONS };
    const summary = await runRelay(
      {
        pool: relayPool,
        destination: queueDestination(sqs, { queueUrl }),
        deadline: Date.now() + roundReserveMs(options) + 5_000,
      },
      options,
    );

    expect(summary).toMatchObject({ published: 3, deadLettered: 1, failedRounds: 0 });
    const received = await receiveAll(sqs, queueUrl, 3);
    expect(received.map((m) => m.MessageAttributes?.outboxId?.StringValue).sort()).toEqual(
      healthy.map((row) => row.id).sort(),
    );
    const { rows } = await db.pool.query(
      "select dead_lettered_at is not null as dead, last_error from outbox_events where id = $1",
      [poison.id],
    );
    expect(rows[0].dead).toBe(true);
    expect(rows[0].last_error).toMatch(/payload: its JSON text could be up to \d+ bytes.*not printed/);
    // Nothing the relay sent is still running on the server (the print would still be going for ~17 s).
    const { rows: active } = await db.pool.query(
      `select count(*)::int as n from pg_stat_activity
       where datname = current_database() and pid <> pg_backend_pid() and state = 'active'`,
    );
    expect(active[0].n).toBe(0);
  }, 120_000);
});
