import { randomBytes } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { waitFor } from "../chaos/support/waitFor.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { openSession, type Session, waitsOnLock } from "../support/sessions.ts";

const db = useTestDatabase();
const sessions: pg.Client[] = [];

async function session(url = db.url): Promise<Session> {
  const opened = await openSession(url);
  sessions.push(opened.client);
  return opened;
}

const waiting = (pid: number) => waitsOnLock(db.pool, pid);

/** Two aggregates named so that `low`'s lock key sorts before `high`'s: the canonical order locks low first. */
async function twoAggregatesByLockKey(): Promise<{ low: string; high: string }> {
  const [a, b] = [`order-${randomBytes(3).toString("hex")}`, `order-${randomBytes(3).toString("hex")}`];
  const { rows } = await db.pool.query<{ a_first: boolean }>(
    `select ${PRIVATE}.outbox_group_lock_key($1) < ${PRIVATE}.outbox_group_lock_key($2) as a_first`,
    [a, b],
  );
  return rows[0]?.a_first ? { low: a, high: b } : { low: b, high: a };
}

async function advisoryLocksHeld(client: pg.PoolClient): Promise<number> {
  const { rows } = await client.query<{ n: number }>(
    "select count(*)::integer as n from pg_locks where pid = pg_backend_pid() and locktype = 'advisory'",
  );
  return rows[0]?.n ?? -1;
}

afterAll(async () => {
  await Promise.all(sessions.map((client) => client.end().catch(() => {})));
});

describe("locks taken by the commit-order trigger", () => {
  it("lets two multi-aggregate enqueue calls with opposite orders finish without a deadlock", async () => {
    // The interleaving that deadlocks when rows lock their aggregate one by one in the caller's order:
    // a third session holds `low`; call A ([low, high]) queues for low holding nothing; call B ([high, low])
    // locks high and queues for low behind A. When low is freed A gets it and wants high, held by B: 40P01.
    // With the canonical order B queues for low before it touches high, so A gets both and B follows.
    const { low, high } = await twoAggregatesByLockKey();
    const blocker = await session();
    const [a, b] = [await session(), await session()];
    await blocker.client.query("begin");
    await blocker.client.query(`select pg_advisory_xact_lock(${PRIVATE}.outbox_group_lock_key($1))`, [low]);

    await a.client.query("begin");
    const callA = enqueue(a.client, [
      anEvent({ aggregateId: low, eventType: "a.1" }),
      anEvent({ aggregateId: high, eventType: "a.2" }),
    ]);
    await waitFor("call A to wait for the blocker", () => waiting(a.pid), 10_000);
    await b.client.query("begin");
    const callB = enqueue(b.client, [
      anEvent({ aggregateId: high, eventType: "b.1" }),
      anEvent({ aggregateId: low, eventType: "b.2" }),
    ]);
    await waitFor("call B to wait", () => waiting(b.pid), 10_000);
    await blocker.client.query("commit");

    const insertedA = await callA;
    await a.client.query("commit");
    const insertedB = await callB;
    await b.client.query("commit");

    const { rows } = await db.pool.query<{ event_type: string }>(
      "select event_type from outbox_events where aggregate_id = any($1::text[]) order by seq",
      [[low, high]],
    );
    // A committed first: both its events precede B's, each call's events in the caller's order.
    expect(rows.map((row) => row.event_type)).toEqual(["a.1", "a.2", "b.1", "b.2"]);
    const seqs = [...insertedA, ...insertedB].map((event) => event.seq);
    expect(seqs).toEqual([...seqs].sort((x, y) => (x < y ? -1 : 1)));
  });

  it("locks the aggregate of every pending row, and none for rows inserted already published or dead-lettered", async () => {
    const client = await db.pool.connect();
    try {
      await client.query("begin");
      await client.query(
        `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, processed_at, dead_lettered_at)
         select 'order', 'history-' || g, 'order.created', '{}',
                case when g % 2 = 0 then now() end, case when g % 2 = 1 then now() end
         from generate_series(1, 100) as g`,
      );
      const afterHistory = await advisoryLocksHeld(client);
      await client.query(
        `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
         select 'order', 'pending-' || (g % 3), 'order.created', '{}' from generate_series(1, 9) as g`,
      );
      const afterPending = await advisoryLocksHeld(client);
      await client.query("rollback");

      expect(afterHistory).toBe(0);
      expect(afterPending).toBe(3);
    } finally {
      client.release();
    }
  });

  it("assigns seq itself: a producer's own seq value (overriding system value) is replaced by a later one", async () => {
    const { rows } = await db.pool.query<{ seq: string; max_before: string }>(
      `with before as (select coalesce(max(seq), 0) as max_before from outbox_events)
       insert into outbox_events (seq, aggregate_type, aggregate_id, event_type, payload)
       overriding system value values (1, 'order', 'order-override', 'order.created', '{}')
       returning seq, (select max_before from before)`,
    );
    const row = rows[0];
    expect(BigInt(row?.seq ?? 0)).toBeGreaterThan(BigInt(row?.max_before ?? 0));
    expect(row?.seq).not.toBe("1");
  });

  it("works for a producer role granted only INSERT on the table (no privilege on the sequence)", async () => {
    const role = `producer_${randomBytes(4).toString("hex")}`;
    await db.pool.query(`create role ${role} login password 'producer'`);
    try {
      await db.pool.query(`grant usage on schema public to ${role}`);
      await db.pool.query(`grant insert on outbox_events to ${role}`);
      const url = new URL(db.url);
      url.username = role;
      url.password = "producer";
      const producer = await session(url.toString());
      const result = await producer.client.query(
        "insert into outbox_events (aggregate_type, aggregate_id, event_type, payload) values ('order', 'order-role', 'order.created', '{}')",
      );
      expect(result.rowCount).toBe(1);
      await producer.client.end();
    } finally {
      await db.pool.query(`drop owned by ${role}`);
      await db.pool.query(`drop role ${role}`);
    }
  });
});

describe("what the caller of several enqueue calls in opposite orders sees", () => {
  let first: Session;
  let second: Session;
  beforeAll(async () => {
    first = await session();
    second = await session();
  });

  it("a deadlock between separate calls is reported as SQLSTATE 40P01 to one of them, the other commits", async () => {
    const { low, high } = await twoAggregatesByLockKey();
    await first.client.query("begin");
    await second.client.query("begin");
    await enqueue(first.client, anEvent({ aggregateId: low }));
    await enqueue(second.client, anEvent({ aggregateId: high }));
    const firstNext = enqueue(first.client, anEvent({ aggregateId: high })).then(
      () => "ok",
      (error: { code?: string }) => error.code,
    );
    await waitFor("the first transaction to wait for the second", () => waiting(first.pid), 10_000);
    const secondNext = enqueue(second.client, anEvent({ aggregateId: low })).then(
      () => "ok",
      (error: { code?: string }) => error.code,
    );
    const outcomes = await Promise.all([secondNext, firstNext]);
    await first.client.query(outcomes[1] === "ok" ? "commit" : "rollback");
    await second.client.query(outcomes[0] === "ok" ? "commit" : "rollback");

    expect([...outcomes].sort()).toEqual(["40P01", "ok"]);
  });
});
