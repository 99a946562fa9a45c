import { beforeEach, describe, expect, it } from "vitest";
import type { SessionPool } from "../../functions/shared/db/session.ts";
import { type RoundReport, runRelay } from "../../functions/shared/relay/engine.ts";
import type { Logger } from "../../functions/shared/util/logger.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { publishedRow } from "../support/outboxRows.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { drain, queueDestination, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

/**
 * Rows no write API would produce, put in by hand: each must be dead-lettered on its own, with an error naming
 * the cause and a log line naming the row, while every other row flows and no round fails.
 * The in-process SQS endpoint validates as SQS does (moto accepts much of what SQS refuses: DESIGN.md).
 */
const db = useTestDatabase();
const aws = useFakeSqs();

/** Small, so oversized rows stay cheap to build; every limit below scales from it. */
const LIMIT = 4_096;

beforeEach(async () => {
  aws.fake.resetFaults();
  aws.fake.up();
  await db.pool.query("delete from outbox_events");
});

interface Logged {
  level: string;
  message: string;
  fields: Record<string, unknown>;
}

function recordingLogger(): { logger: Logger; logged: Logged[] } {
  const logged: Logged[] = [];
  const record = (level: string) => (message: string, fields: Record<string, unknown>) =>
    void logged.push({ level, message, fields });
  return { logger: { info: record("info"), warn: record("warn"), error: record("error") }, logged };
}

/** Inserts one row by hand: `columns` are SQL expressions, overriding a valid default for each column. */
/**
 * Since migration 0006 the insert trigger refuses rows whose JSON text cannot be a message; rows put in around it
 * (older than 0006, or a restore with triggers disabled) are the relay's to bound. `aroundTrigger` inserts so.
 */
async function insertAroundTrigger(columns: Record<string, string>): Promise<string> {
  const client = await db.pool.connect();
  try {
    await client.query("begin");
    await client.query("alter table outbox_events disable trigger outbox_commit_order");
    const id = await insertByHand(columns, client);
    await client.query("alter table outbox_events enable always trigger outbox_commit_order");
    await client.query("commit");
    return id;
  } finally {
    client.release();
  }
}

async function insertByHand(
  columns: Record<string, string>,
  on: { query: typeof db.pool.query } = db.pool,
): Promise<string> {
  const row = {
    aggregate_type: "'order'",
    aggregate_id: `'hand-${Math.random().toString(36).slice(2)}'`,
    event_type: "'order.created'",
    payload: `'{"ok": true}'`,
    ...columns,
  };
  const { rows } = await on.query(
    `insert into outbox_events (${Object.keys(row).join(", ")}) values (${Object.values(row).join(", ")}) returning id`,
  );
  return rows[0].id;
}

async function states(ids: string[]) {
  const { rows } = await db.pool.query(
    `select id, processed_at is not null as published, dead_lettered_at is not null as dead, attempts,
            transient_failures, last_error
     from outbox_events where id = any($1::uuid[])`,
    [ids],
  );
  return new Map(rows.map((row) => [row.id as string, row]));
}

describe("relay: one malformed row never stops the others", () => {
  const adversarial: [string, Record<string, string>, RegExp][] = [
    ["created_at infinity", { created_at: "'infinity'" }, /created_at: is Infinity/],
    ["created_at -infinity", { created_at: "'-infinity'" }, /created_at: is -Infinity/],
    [
      "created_at beyond a JavaScript Date",
      { created_at: "'290000-01-01 00:00:00+00'" },
      /created_at: is beyond the range of a JavaScript Date/,
    ],
    [
      "payload over the limit, compressible (small stored, large text)",
      { payload: `jsonb_build_object('blob', repeat('x', ${LIMIT * 50}))` },
      new RegExp(
        `payload: its JSON text is ${LIMIT * 50 + 12} bytes .* over the queue's limit of ${LIMIT}; dead-lettered without loading it`,
      ),
    ],
    [
      "payload whose numbers print far larger than they are stored (1e-300)",
      { payload: "(select jsonb_agg(1e-300) from generate_series(1, 200))" },
      /payload: its JSON text is 6\d{4} bytes .*without loading it/,
    ],
    [
      "payload stored in more than 8 x the limit",
      { payload: `(select jsonb_agg(md5(i::text)) from generate_series(1, ${LIMIT}) as i)` },
      /payload: stored as \d+ bytes of jsonb, which is more than \d+ bytes of JSON, over the queue's limit/,
    ],
    [
      "payload just over the limit once attributes are counted",
      { payload: `jsonb_build_object('blob', repeat('x', ${LIMIT - 20}))` },
      new RegExp(`payload: message is \\d+ bytes, over the queue's limit of ${LIMIT}`),
    ],
    [
      "header with a number value",
      { headers: `'{"retries": 3}'` },
      /headers\.retries: must be a string, got number/,
    ],
    [
      "header with a nested object",
      { headers: `'{"trace": {"id": "x"}}'` },
      /headers\.trace: must be a string, got object/,
    ],
    [
      "too many headers (SQS takes 10 attributes)",
      { headers: `'{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}'` },
      /headers: has 5 entries, the limit is 4/,
    ],
    [
      "headers over the limit",
      { headers: `jsonb_build_object('big', repeat('h', ${LIMIT * 2}))` },
      new RegExp(
        `headers: as SQS message attributes they take ${LIMIT * 2 + 9} bytes, over the queue's limit`,
      ),
    ],
    [
      "header named like a relay attribute",
      { headers: `'{"eventType": "x"}'` },
      /headers\.eventType: is reserved/,
    ],
    ["header with an empty value", { headers: `'{"tenant": ""}'` }, /headers\.tenant: must not be empty/],
    [
      "header with a bad name",
      { headers: `'{"a b": "x"}'` },
      /headers\.a b: is not a valid SQS message attribute name/,
    ],
    ["aggregate_id with a space", { aggregate_id: "'with space'" }, /aggregate_id: contains " "/],
    ["aggregate_id with a non-ASCII letter", { aggregate_id: "'café'" }, /aggregate_id: contains "é"/],
    [
      "event_type with a control character",
      { event_type: "e'order\\u0001created'" },
      /event_type: contains U\+0001/,
    ],
    ["aggregate_type with U+FFFF", { aggregate_type: "e'order\\uFFFF'" }, /aggregate_type: contains U\+ffff/],
    [
      "payload string with U+FFFE",
      { payload: `jsonb_build_object('s', e'\\uFFFE')` },
      /payload: contains U\+fffe/,
    ],
  ];

  it("dead-letters each adversarial row on its own, names it in the log, and publishes every other row", async () => {
    const queue = await createFifoQueue(aws.sqs, "isolation");
    const bad = new Map<string, { what: string; error: RegExp }>();
    const healthy: string[] = [];
    for (const [what, columns, error] of adversarial) {
      healthy.push(...(await enqueueCommitted(db.pool, [anEvent()])).map((row) => row.id));
      bad.set(await insertByHand(columns), { what, error });
    }
    healthy.push(...(await enqueueCommitted(db.pool, [anEvent()])).map((row) => row.id));
    const { logger, logged } = recordingLogger();

    const summary = await runRelay(
      {
        pool: db.pool,
        destination: queueDestination(aws.sqs, { queueUrl: queue, maxMessageBytes: LIMIT }),
        deadline: Date.now() + 60_000,
        logger,
      },
      testRelayOptions(queue, { maxMessageBytes: LIMIT }),
    );

    expect(summary).toMatchObject({ failedRounds: 0, deadLettered: bad.size, published: healthy.length });
    const state = await states([...bad.keys(), ...healthy]);
    for (const id of healthy) expect(state.get(id)).toEqual(publishedRow({ dead: false }));
    for (const [id, { what, error }] of bad) {
      expect(state.get(id), what).toMatchObject({ published: false, dead: true, attempts: 1 });
      expect(state.get(id)?.last_error, what).toMatch(error);
      expect(
        logged.filter((line) => line.fields.eventId === id),
        what,
      ).toEqual([
        { level: "error", message: "event dead-lettered", fields: expect.objectContaining({ eventId: id }) },
      ]);
    }
  });

  it("publishes rows with finite extreme timestamps and a delayed row with available_at -infinity", async () => {
    const queue = await createFifoQueue(aws.sqs, "extreme-times");
    const ids = [
      await insertByHand({ created_at: "'4000-01-01 00:00:00+00 BC'" }),
      await insertByHand({ created_at: "'9999-12-31 23:59:59+00'" }),
      await insertByHand({ available_at: "'-infinity'" }),
    ];
    // Delayed for ever: malformed since issue 21 (more than 365 days ahead), dead-lettered naming the field.
    const never = await insertByHand({ available_at: "'infinity'" });

    const summary = await drain(db.pool, aws.sqs, testRelayOptions(queue));

    expect(summary).toMatchObject({ failedRounds: 0, published: 3, deadLettered: 1 });
    const state = await states([...ids, never]);
    for (const id of ids) expect(state.get(id)).toEqual(publishedRow());
    expect(state.get(never)).toMatchObject({ published: false, dead: true });
    expect(state.get(never)?.last_error).toMatch(/available_at: is infinity, more than 365 days ahead/);
    const createdAt = aws.fake.deliveries().map((delivery) => delivery.attributes.createdAt);
    expect(createdAt).toContain("-003999-01-01T00:00:00.000Z");
    expect(createdAt).toContain("9999-12-31T23:59:59.000Z");
  });

  it("never brings an oversized payload's text into the relay", async () => {
    const queue = await createFifoQueue(aws.sqs, "not-loaded");
    const huge = await insertAroundTrigger({ payload: "jsonb_build_object('blob', repeat('x', 20000000))" });
    const [healthy] = await enqueueCommitted(db.pool, [anEvent()]);
    // The real pool, watched: the longest string any relay query brought back.
    let longest = 0;
    const watching: SessionPool = {
      async connect() {
        const client = await db.pool.connect();
        const { query, release } = client;
        const watched = async (...args: unknown[]) => {
          const result = await (query as (...a: unknown[]) => Promise<{ rows?: unknown[] }>).apply(
            client,
            args,
          );
          for (const row of result?.rows ?? []) {
            for (const value of Object.values(row as object)) {
              if (typeof value === "string") longest = Math.max(longest, value.length);
            }
          }
          return result;
        };
        // Watched while checked out, as it was once back in the pool.
        return Object.assign(client, {
          query: watched,
          release: (destroy?: boolean | Error) => {
            Object.assign(client, { query, release });
            release.call(client, destroy);
          },
        });
      },
    };

    const summary = await runRelay(
      {
        pool: watching,
        destination: queueDestination(aws.sqs, { queueUrl: queue }),
        deadline: Date.now() + 60_000,
      },
      testRelayOptions(queue, { mode: "drain" }),
    );

    expect(summary).toMatchObject({ failedRounds: 0, deadLettered: 1, published: 1 });
    expect(longest).toBeLessThan(10_000);
    const state = await states([huge, healthy?.id as string]);
    // Unbounded by the trigger: the relay bounds it (6 bytes of text per stored byte at most) and, over what it
    // prints to size a row, dead-letters it unprinted.
    expect(state.get(huge)?.last_error).toMatch(
      /its JSON text could be up to \d+ bytes .*without loading it/,
    );
    expect(state.get(healthy?.id as string)).toEqual(publishedRow());
  });

  it("dead-letters a payload whose JSON text the database cannot produce (over 1 GB), alone", async () => {
    const queue = await createFifoQueue(aws.sqs, "unprintable");
    // 70,000 numbers of 16,384 printed digits each: ~20 KB stored, over 1 GB of text (SQLSTATE 54000).
    const unprintable = await insertAroundTrigger({
      payload: "(select jsonb_agg(1e-16383) from generate_series(1, 70000))",
    });
    const [healthy] = await enqueueCommitted(db.pool, [anEvent()]);

    const summary = await drain(db.pool, aws.sqs, testRelayOptions(queue, { statementTimeoutMs: 20_000 }));

    expect(summary).toMatchObject({ failedRounds: 0, deadLettered: 1, published: 1 });
    const state = await states([unprintable, healthy?.id as string]);
    // Before 0006 the relay printed it and Postgres failed the print (SQLSTATE 54000) after ~1 GB; now it is
    // bounded first (70,000 numbers of 16,383 decimals) and never printed.
    expect(state.get(unprintable)?.last_error).toMatch(
      /payload: its JSON text could be up to \d+ bytes.*not printed/,
    );
  }, 120_000);
});

describe("relay: recording a round cannot fail because of one row", () => {
  it("saturates counters at their limit and strips what Postgres text refuses from errors", async () => {
    const queue = await createFifoQueue(aws.sqs, "record");
    const rejected = await insertByHand({ attempts: "2147483647" });
    const serverSide = await insertByHand({ transient_failures: "2147483647" });
    const [healthy] = await enqueueCommitted(db.pool, [anEvent()]);
    aws.fake.setFaults({
      failEntry: (entry) => {
        if (entry.MessageDeduplicationId === rejected)
          return { code: "UnsupportedOperation", senderFault: true, message: "nul\u0000inside" };
        if (entry.MessageDeduplicationId === serverSide)
          return { code: "InternalError", senderFault: false, message: "x".repeat(5_000) };
        return false;
      },
    });

    const summary = await runRelay(
      {
        pool: db.pool,
        destination: queueDestination(aws.sqs, { queueUrl: queue }),
        deadline: Date.now() + 60_000,
      },
      testRelayOptions(queue, { backoffBaseMs: 60_000, backoffMaxMs: 60_000 }),
    );

    expect(summary).toMatchObject({ failedRounds: 0, published: 1, deadLettered: 1 });
    const state = await states([rejected, serverSide, healthy?.id as string]);
    expect(state.get(rejected)).toMatchObject({ attempts: 2147483647, dead: true });
    expect(state.get(rejected)?.last_error).toMatch(/UnsupportedOperation: nulinside/);
    expect(state.get(serverSide)).toMatchObject({ transient_failures: 2147483647, dead: false });
    expect(state.get(serverSide)?.last_error).toHaveLength(1_000);
    expect(state.get(healthy?.id as string)).toEqual(publishedRow());
    // Recorded once: the accepted message was not sent again by a retried round.
    expect(aws.fake.deliveries().filter((delivery) => delivery.dedupId === healthy?.id)).toHaveLength(1);
  });
});

describe("relay: a round's memory is bounded by bytes", () => {
  it("loads rows until the byte budget is spent, the rest wait for the next round, never fewer than one", async () => {
    const queue = await createFifoQueue(aws.sqs, "budget");
    const payload = { blob: "b".repeat(3_000) };
    await enqueueCommitted(
      db.pool,
      Array.from({ length: 10 }, () => anEvent({ payload })),
    );
    const rounds: RoundReport[] = [];

    const tight = await runRelay(
      {
        pool: db.pool,
        destination: queueDestination(aws.sqs, { queueUrl: queue }),
        deadline: Date.now() + 60_000,
        onRound: (report) => rounds.push(report),
      },
      testRelayOptions(queue, { batchMaxBytes: 7_000 }),
    );

    // ~3 KB each: two fit in 7,000 bytes; every round claimed what was left, published two, held the rest.
    expect(tight.published).toBe(10);
    expect(rounds.filter((round) => round.published > 0).map((round) => round.published)).toEqual([
      2, 2, 2, 2, 2,
    ]);
    expect(rounds[0]).toMatchObject({ claimed: 10, held: 8 });

    await enqueueCommitted(
      db.pool,
      Array.from({ length: 10 }, () => anEvent({ payload })),
    );
    rounds.length = 0;
    await runRelay(
      {
        pool: db.pool,
        destination: queueDestination(aws.sqs, { queueUrl: queue }),
        deadline: Date.now() + 60_000,
        onRound: (report) => rounds.push(report),
      },
      testRelayOptions(queue, { batchMaxBytes: 1_024 }),
    );
    expect(rounds.filter((round) => round.published > 0).map((round) => round.published)).toEqual(
      Array(10).fill(1),
    );
  });
});
