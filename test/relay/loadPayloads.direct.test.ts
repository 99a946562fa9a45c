import { beforeEach, describe, expect, it } from "vitest";
import type { Queryable } from "../../functions/shared/db/session.ts";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import {
  DIRECT_MAX_STORED_BYTES,
  type LoadedPayload,
  loadPayloads,
  MAX_TEXT_BYTES_PER_STORED_BYTE,
  type PayloadLimits,
} from "../../functions/shared/relay/sql/loadPayloads.ts";
import { useTestDatabase } from "../support/db.ts";
import { loadPayloadsByWalk } from "../support/loadPayloads.ts";

/**
 * loadPayloads settles small uncompressed rows with one plain statement and no savepoint, and hands the rest to
 * the walk. Every case compares its decisions with the walk alone (the reference), on the same rows in the same
 * transaction, and checks which path ran from the statements sent.
 */
const db = useTestDatabase();
const names = outboxNames({});
const LIMIT = 4_096;

beforeEach(async () => {
  await db.pool.query("delete from outbox_events");
});

/** Inserts rows in seq order, each `payload` a SQL expression; returns their ids in that order. */
async function insert(payloads: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (const [i, payload] of payloads.entries()) {
    const { rows } = await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, headers)
       values ('order', $1, 'order.created', ${payload}, '{"traceparent": "00-abc-01"}') returning id`,
      [`direct-${i}`],
    );
    ids.push(rows[0].id);
  }
  return ids;
}

/** Runs loadPayloads and the walk alone on `ids` in one transaction; returns both and the statements sent. */
async function compare(ids: string[], limits: PayloadLimits) {
  const client = await db.pool.connect();
  const sent: string[] = [];
  const recording: Queryable = {
    query: (text: string, values?: unknown[]) => {
      sent.push(text);
      return client.query(text, values);
    },
  } as Queryable;
  try {
    await client.query("begin");
    const actual = await loadPayloads(recording, names, ids, limits);
    const reference = await loadPayloadsByWalk(client, names, ids, limits);
    await client.query("rollback");
    return {
      actual,
      reference,
      sent,
      savepoints: sent.filter((text) => text.startsWith("savepoint")).length,
    };
  } finally {
    client.release();
  }
}

const statuses = (results: LoadedPayload[]) => results.map((result) => result.status);

describe("loadPayloads: the direct statement and when the walk takes over", () => {
  it("settles small uncompressed rows with one statement and no savepoint", async () => {
    const ids = await insert(Array.from({ length: 20 }, (_, i) => `'{"n": ${i}}'`));

    const { actual, reference, sent, savepoints } = await compare(ids, {
      maxMessageBytes: LIMIT,
      budgetBytes: 1_000_000,
    });

    expect(actual).toEqual(reference);
    expect(statuses(actual)).toEqual(Array(20).fill("loaded"));
    expect(sent).toHaveLength(1);
    expect(savepoints).toBe(0);
  });

  it("dead-letters a number-expanding uncompressed row on the direct statement, its text never loaded", async () => {
    // 10 numbers of 131,072 digits: ~170 bytes stored, 1.3 MB of text, over 1.5 × the limit (and under the
    // 1.5 MiB the insert trigger of 0006 lets in).
    const ids = await insert([
      `'{"first": 1}'`,
      "(select jsonb_agg(1e131071) from generate_series(1, 10))",
      `'{"last": 1}'`,
    ]);
    const { rows } = await db.pool.query(
      "select pg_column_compression(payload) as compression, pg_column_size(payload) as stored from outbox_events where id = $1",
      [ids[1]],
    );
    expect(rows[0].compression).toBeNull();
    expect(rows[0].stored).toBeLessThan(DIRECT_MAX_STORED_BYTES);

    const { actual, reference, savepoints } = await compare(ids, {
      maxMessageBytes: LIMIT,
      budgetBytes: 1_000_000,
    });

    expect(actual).toEqual(reference);
    expect(statuses(actual)).toEqual(["loaded", "unsendable", "loaded"]);
    expect(actual[1]).toMatchObject({ error: expect.stringMatching(/JSON text is 1\d{6} bytes/) });
    expect(savepoints).toBe(0);
  });

  it("hands a compressed row and every row after it to the walk", async () => {
    // 3,000 repeated characters: TOAST compresses the row, so its raw size is unknown without decompressing it.
    const ids = await insert([`'{"a": 1}'`, `jsonb_build_object('blob', repeat('c', 3000))`, `'{"b": 1}'`]);
    const { rows } = await db.pool.query(
      "select pg_column_compression(payload) as c from outbox_events where id = $1",
      [ids[1]],
    );
    expect(rows[0].c).not.toBeNull();

    const { actual, reference, savepoints } = await compare(ids, {
      maxMessageBytes: LIMIT,
      budgetBytes: 1_000_000,
    });

    expect(actual).toEqual(reference);
    expect(statuses(actual)).toEqual(["loaded", "loaded", "loaded"]);
    expect(savepoints).toBe(1);
  });

  it("hands a sendable row over its share of the budget to the walk, which loads it while the budget lasts", async () => {
    // Budget 2,000 over 4 rows: a share of 500 bytes. The 1,200-byte row is over its share, within the budget.
    const ids = await insert([
      `'{"a": 1}'`,
      `jsonb_build_object('blob', repeat('x', 1200))`,
      `'{"b": 1}'`,
      `jsonb_build_object('blob', repeat('y', 1200))`,
    ]);

    const { actual, reference, savepoints } = await compare(ids, {
      maxMessageBytes: LIMIT,
      budgetBytes: 2_000,
    });

    expect(actual).toEqual(reference);
    expect(statuses(actual)).toEqual(["loaded", "loaded", "loaded", "overBudget"]);
    expect(savepoints).toBe(1);
  });

  it("loads the first sendable row whatever its size, through the walk", async () => {
    const ids = await insert([`jsonb_build_object('blob', repeat('x', 1200))`, `'{"b": 1}'`]);

    const { actual, reference } = await compare(ids, { maxMessageBytes: LIMIT, budgetBytes: 100 });

    expect(actual).toEqual(reference);
    expect(statuses(actual)).toEqual(["loaded", "overBudget"]);
  });

  it("keeps the walk's 8 × limit gate: a row stored over it is dead-lettered unprinted, as the walk does", async () => {
    // 100 numbers: ~1.2 KB stored (too small for TOAST to compress) against a 64-byte limit, over 8 × 64.
    const ids = await insert([
      `'{"a": 1}'`,
      "(select jsonb_agg(g) from generate_series(1000000, 1000099) as g)",
    ]);

    const { actual, reference } = await compare(ids, { maxMessageBytes: 64, budgetBytes: 1_000_000 });

    expect(actual).toEqual(reference);
    expect(actual[1]).toMatchObject({
      status: "unsendable",
      error: expect.stringMatching(/stored as \d+ bytes/),
    });
  });
});

describe("loadPayloads: the direct statement cannot fail for a row's data", () => {
  it("prints no uncompressed jsonb longer than MAX_TEXT_BYTES_PER_STORED_BYTE × its stored size", async () => {
    // The densest expansion the numeric format allows: weight 32767, display scale 16383, one digit group.
    const widest = "round(1e131071::numeric, 16383)";
    const { rows } = await db.pool.query(
      `select pg_column_compression(x) as compression, octet_length(x::text)::float8 / pg_column_size(x) as ratio
       from (values (to_jsonb(${widest})), (jsonb_build_array(${widest}, ${widest}, ${widest}, ${widest})),
                    (jsonb_build_object('', ${widest}))) as v(x)`,
    );
    for (const row of rows) {
      expect(row.compression).toBeNull();
      expect(row.ratio).toBeLessThanOrEqual(MAX_TEXT_BYTES_PER_STORED_BYTE);
    }
    // Near the bound, so the bound is not loose by an order of magnitude either.
    expect(Math.max(...rows.map((row) => row.ratio))).toBeGreaterThan(MAX_TEXT_BYTES_PER_STORED_BYTE * 0.6);
    // So nothing it prints reaches the 1 GB at which Postgres refuses (SQLSTATE 54000).
    expect(DIRECT_MAX_STORED_BYTES * MAX_TEXT_BYTES_PER_STORED_BYTE).toBeLessThan(2 ** 30 - 1);
  });
});
