import { describe, expect, it } from "vitest";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import {
  type ClaimCursor,
  claimBatch,
  EXAMINE_PER_CLAIMED_ROW,
  newClaimCursor,
} from "../../functions/shared/relay/sql/claimBatch.ts";
import { useTestDatabase } from "../support/db.ts";
import { explainClaim } from "../support/explainClaim.ts";
import { drain, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, receiveAll, sqsClient } from "../support/sqs.ts";

const db = useTestDatabase();
const names = outboxNames();

/** `count` pending rows of one aggregate in one statement, optionally with column overrides (SQL expressions). */
async function insertRows(aggregateId: string, count: number, columns: Record<string, string> = {}) {
  const extra = Object.keys(columns);
  await db.pool.query(
    `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload${extra.map((c) => `, ${c}`).join("")})
     select 'order', $1::text, 'e', jsonb_build_object('n', g)${extra.map((c) => `, ${columns[c]}`).join("")}
     from generate_series(1, $2::integer) as g
     order by g`,
    [aggregateId, count],
  );
}

/** One pending row for each of `count` aggregates `<prefix>-0000` .. (zero-padded, so key order = number order). */
async function insertAggregates(prefix: string, count: number, columns: Record<string, string> = {}) {
  const extra = Object.keys(columns);
  await db.pool.query(
    `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload${extra.map((c) => `, ${c}`).join("")})
     select 'order', $1::text || '-' || lpad(g::text, 4, '0'), 'e', '{}'::jsonb${extra.map((c) => `, ${columns[c]}`).join("")}
     from generate_series(0, $2::integer - 1) as g
     order by g`,
    [prefix, count],
  );
}

/** A claim in a transaction of its own, rolled back: which rows it would take. */
async function claim(options: { limit: number; strictOrder?: boolean; cursor?: ClaimCursor }) {
  const client = await db.pool.connect();
  try {
    await client.query("begin");
    return await claimBatch(client, names, { strictOrder: false, ...options });
  } finally {
    await client.query("rollback");
    client.release();
  }
}

/** Shared buffers the claim's SQL touches under EXPLAIN (ANALYZE, BUFFERS), rolled back: its work, not its time. */
async function claimBuffers(options: { limit: number; strictOrder?: boolean }): Promise<number> {
  const plan = await explainClaim(db.pool, names, { strictOrder: false, ...options });
  return (plan["Shared Hit Blocks"] ?? 0) + (plan["Shared Read Blocks"] ?? 0);
}

async function reset() {
  await db.pool.query("truncate outbox_events");
}

const ids = (rows: { aggregate_id: string }[]) => rows.map((row) => row.aggregate_id).sort();

describe("claim with a backlogged aggregate", () => {
  it("does the same work whether 1 or 200,000 rows wait behind the oldest aggregate's head", async () => {
    // Statistics from a healthy outbox (nothing pending), as in production when a backlog builds.
    const work = async (waiting: number) => {
      await reset();
      await db.pool.query("vacuum analyze outbox_events");
      await insertRows("hot", waiting); // the oldest rows: the hot aggregate fell behind
      await insertAggregates("normal", 300);
      return [await claimBuffers({ limit: 100 }), await claimBuffers({ limit: 100, strictOrder: true })];
    };

    const baselines = await work(1);
    const backloggeds = await work(200_000);
    for (const [i, baseline = 0] of baselines.entries()) {
      const backlogged = backloggeds[i];

      // A few buffers per aggregate examined; the 200,000 waiting rows are never read (the old claim read
      // each of them and probed its aggregate's head for each: hundreds of thousands of buffers).
      expect(baseline).toBeLessThan(12 * 100);
      // One more index level is all the backlog may add: at most one buffer per aggregate descended (100). Measured
      // 900 backlogged against 800-900 for the baseline, whose plan varies with 0010's seq index.
      expect(backlogged).toBeLessThanOrEqual(baseline + 100);
    }
  });

  it("claims only the hot aggregate's head, and the other aggregates in the same batch", async () => {
    await reset();
    await insertRows("hot", 20_000);
    await insertAggregates("normal", 50);

    const rows = await claim({ limit: 100 });

    expect(rows).toHaveLength(51);
    const { rows: heads } = await db.pool.query(
      "select min(seq) as seq from outbox_events where aggregate_id = 'hot'",
    );
    expect(rows.filter((row) => row.aggregate_id === "hot").map((row) => row.seq)).toEqual([heads[0].seq]);
  });
});

describe("claim of blocked aggregates", () => {
  // Aggregate `blocked` has a head that cannot be claimed and 20,000 rows behind it; `free-*` are claimable.
  const blockedKinds: [string, Record<string, string>, boolean][] = [
    ["in backoff after a failure", { attempts: "1", available_at: "now() + interval '1 hour'" }, false],
    ["delayed by its producer", { available_at: "now() + interval '1 hour'" }, false],
    ["a dead letter, strict mode", { attempts: "10", dead_lettered_at: "now()", last_error: "'x'" }, true],
  ];
  for (const [kind, head, strictOrder] of blockedKinds) {
    it(`does not claim the successors of a head ${kind}, claims the others, reads none of the waiting rows`, async () => {
      await reset();
      await db.pool.query("vacuum analyze outbox_events");
      await insertAggregates("free", 20);
      await insertRows("blocked", 1, head);
      await insertRows("blocked", 20_000);

      const rows = await claim({ limit: 100, strictOrder });
      const work = await claimBuffers({ limit: 100, strictOrder });

      expect(ids(rows)).toEqual(Array.from({ length: 20 }, (_, i) => `free-${String(i).padStart(4, "0")}`));
      // 21 aggregates examined, a dozen buffers each at most (two index descents and the heap). The claim
      // before the loose index scan read each of the 20,000 waiting rows and probed its head: > 60,000 buffers.
      expect(work).toBeLessThan(12 * 21);
    });
  }

  it("parks a dead letter in the default mode: its successor is the head", async () => {
    await reset();
    await insertRows("parked", 1, { attempts: "10", dead_lettered_at: "now()", last_error: "'x'" });
    await insertRows("parked", 20_000);

    const rows = await claim({ limit: 10 });

    expect(rows.map((row) => row.aggregate_id)).toEqual(["parked"]);
    const [first] = (
      await db.pool.query("select min(seq) as seq from outbox_events where dead_lettered_at is null")
    ).rows;
    expect(rows[0]?.seq).toBe(first.seq);
  });

  it("skips heads locked by another relay and still fills the batch from aggregates further on", async () => {
    await reset();
    await insertAggregates("a", 150);
    await insertAggregates("a", 150); // a second row each, behind the heads
    await insertRows("a-0000", 20_000); // and a backlog behind one of them
    await insertAggregates("b", 100);
    const other = await db.pool.connect();
    try {
      await other.query("begin");
      const locked = await claimBatch(other, names, { limit: 150, strictOrder: false });
      expect(locked.every((row) => row.aggregate_id.startsWith("a-"))).toBe(true);

      const rows = await claim({ limit: 100 });

      // Not one of the locked heads, and not one of their successors.
      expect(ids(rows)).toEqual(Array.from({ length: 100 }, (_, i) => `b-${String(i).padStart(4, "0")}`));
      // 250 aggregates examined (150 locked, skipped without waiting), none of the waiting rows.
      expect(await claimBuffers({ limit: 100 })).toBeLessThan(12 * 250);
    } finally {
      await other.query("rollback");
      other.release();
    }
  });
});

describe("claim round robin", () => {
  it("continues after the last aggregate it examined and wraps to the start", async () => {
    await reset();
    await insertAggregates("agg", 5);
    await insertAggregates("agg", 5); // successors, never claimed while their heads are pending
    const cursor = newClaimCursor();

    const first = await claim({ limit: 2, cursor });
    const second = await claim({ limit: 2, cursor });
    const third = await claim({ limit: 2, cursor });

    expect(ids(first)).toEqual(["agg-0000", "agg-0001"]);
    expect(ids(second)).toEqual(["agg-0002", "agg-0003"]);
    expect(ids(third)).toEqual(["agg-0000", "agg-0004"]); // agg-0004, then round to the start
    expect(cursor.after).toEqual({ aggregateId: "agg-0000" });
    expect(cursor.sawAll).toBe(false);

    const short = await claim({ limit: 20, cursor });
    expect(ids(short)).toHaveLength(5);
    expect(cursor.sawAll).toBe(true);
  });

  it("crosses a run of blocked aggregates longer than one claim examines, one window per claim", async () => {
    await reset();
    const examined = EXAMINE_PER_CLAIMED_ROW; // per claim at limit 1
    await insertAggregates("blocked", examined * 2 + 5, { available_at: "now() + interval '1 hour'" });
    await insertRows("zz-free", 1);
    const cursor = newClaimCursor();

    const windows = [];
    for (let i = 0; i < 3; i++) {
      const rows = await claim({ limit: 1, cursor });
      windows.push({ rows: ids(rows), after: cursor.after.aggregateId, sawAll: cursor.sawAll });
    }

    expect(windows).toEqual([
      { rows: [], after: `blocked-${String(examined - 1).padStart(4, "0")}`, sawAll: false },
      { rows: [], after: `blocked-${String(2 * examined - 1).padStart(4, "0")}`, sawAll: false },
      { rows: ["zz-free"], after: "zz-free", sawAll: false },
    ]);
  });

  it("says it saw every aggregate only once a run of capped claims has come round to where it began", async () => {
    await reset();
    const examined = EXAMINE_PER_CLAIMED_ROW;
    await insertAggregates("blocked", examined * 2 + 5, { available_at: "now() + interval '1 hour'" });
    const cursor = newClaimCursor();

    const sawAll = [];
    for (let i = 0; i < 3; i++) {
      await claim({ limit: 1, cursor });
      sawAll.push(cursor.sawAll);
    }

    // 10 + 10 examined, then the last 5 and round to the start: the whole key space seen.
    expect(sawAll).toEqual([false, false, true]);
    expect(cursor.after.aggregateId).toBe("blocked-0004");
  });

  it("lets a draining relay publish an aggregate that lies beyond a run of blocked ones", async () => {
    await reset();
    const sqs = sqsClient();
    const queueUrl = await createFifoQueue(sqs);
    await insertAggregates("blocked", EXAMINE_PER_CLAIMED_ROW * 3, {
      available_at: "now() + interval '1 hour'",
    });
    await insertRows("zz-free", 1);

    const summary = await drain(db.pool, sqs, testRelayOptions(queueUrl, { batchSize: 1 }));

    expect(summary.published).toBe(1);
    const received = await receiveAll(sqs, queueUrl, 1);
    expect(received.map((message) => message.Attributes?.MessageGroupId)).toEqual(["zz-free"]);
    sqs.destroy();
  });
});
