import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SessionClient, SessionPool } from "../../functions/shared/db/session.ts";
import { DEFAULT_PURGE_OPTIONS, runPurge } from "../../functions/shared/purge/purge.ts";
import { relayRound } from "../../functions/shared/relay/engine.ts";
import { newClaimCursor } from "../../functions/shared/relay/sql/claimBatch.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { queueDestination, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, receiveAll, sqsClient } from "../support/sqs.ts";

/**
 * Issue 21, finding 4: a role, database or RDS parameter group may set default_transaction_isolation =
 * repeatable read. A round whose snapshot predates another relay's commit then fails its claim with 40001
 * ("could not serialize access due to concurrent update") and is redone. Every relay and purge transaction goes
 * through withTransaction, which says read committed itself (functions/shared/db/session.ts).
 */
const db = useTestDatabase();
const sqs = sqsClient();
let pool: pg.Pool;

beforeAll(async () => {
  const database = new URL(db.url).pathname.slice(1);
  await db.pool.query(`alter database ${database} set default_transaction_isolation = 'repeatable read'`);
  pool = new pg.Pool({ connectionString: db.url, max: 4 });
  const { rows } = await pool.query("show default_transaction_isolation");
  expect(rows[0].default_transaction_isolation).toBe("repeatable read");
});
afterAll(() => pool.end());

/**
 * A pool whose sessions stop after the round's first statement (which takes a repeatable-read snapshot) until
 * `release` is called: the other relay commits in between, deterministically.
 */
function gatedPool(inner: pg.Pool) {
  let reached!: () => void;
  let release!: () => void;
  const atGate = new Promise<void>((resolve) => {
    reached = resolve;
  });
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const gated: SessionPool = {
    async connect() {
      const client = await inner.connect();
      const session: SessionClient = {
        async query(text: string, values?: unknown[]) {
          const result = await client.query(text, values);
          if (text.includes("set_config('statement_timeout'")) {
            reached();
            await gate;
          }
          return result as never;
        },
        release: (destroy?: boolean | Error) => client.release(destroy as boolean),
      };
      return session;
    },
  };
  return { gated, atGate, release };
}

describe("relay and purge under default_transaction_isolation = repeatable read", () => {
  it("a round whose first statement came before another relay's commit claims what is left, no 40001", async () => {
    const queueUrl = await createFifoQueue(sqs, "read-committed");
    const options = testRelayOptions(queueUrl);
    const destination = queueDestination(sqs, { queueUrl });
    const [event] = await enqueueCommitted(pool, [anEvent()]);
    const late = gatedPool(pool);

    const lateRound = relayRound(
      { pool: late.gated, destination, deadline: Date.now() + 60_000 },
      options,
      newClaimCursor(),
    );
    await late.atGate;
    const first = await relayRound(
      { pool, destination, deadline: Date.now() + 60_000 },
      options,
      newClaimCursor(),
    );
    late.release();
    const second = await lateRound;

    expect(first.published).toBe(1);
    expect(second).toMatchObject({ claimed: 0, published: 0 });
    const received = await receiveAll(sqs, queueUrl, 1);
    expect(received.map((m) => m.MessageAttributes?.outboxId?.StringValue)).toEqual([event?.id]);
  });

  it("every purge transaction runs read committed (asked inside each one)", async () => {
    const isolations: string[] = [];
    const recording: SessionPool = {
      async connect() {
        const client = await pool.connect();
        return {
          async query(text: string, values?: unknown[]) {
            const result = await client.query(text, values);
            if (text.startsWith("begin")) {
              const { rows } = await client.query("select current_setting('transaction_isolation') as level");
              isolations.push(rows[0].level);
            }
            return result as never;
          },
          release: (destroy?: boolean | Error) => client.release(destroy as boolean),
        };
      },
    };
    await pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, processed_at)
       values ('order', 'purged-1', 'e', '{}', now() - interval '30 days')`,
    );

    const summary = await runPurge(
      { pool: recording, deadline: Date.now() + 60_000 },
      { ...DEFAULT_PURGE_OPTIONS },
    );

    expect(summary).toMatchObject({ stoppedBy: "drained", deletedRows: 1 });
    expect(isolations.length).toBeGreaterThan(1);
    expect(new Set(isolations)).toEqual(new Set(["read committed"]));
  });
});
