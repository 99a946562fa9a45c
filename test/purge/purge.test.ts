import type pg from "pg";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { SessionClient, SessionPool } from "../../functions/shared/db/session.ts";
import { readOutboxSnapshot } from "../../functions/shared/observe/snapshot.ts";
import { ConfigError } from "../../functions/shared/outbox/errors.ts";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import {
  DEFAULT_PURGE_OPTIONS,
  type PurgeOptions,
  type PurgeSummary,
  runPurge,
} from "../../functions/shared/purge/purge.ts";
import { purgeConfigFromEnv } from "../../functions/shared/purge/settings.ts";
import { purgePublished, purgeStatements } from "../../functions/shared/purge/sql/purgePublished.ts";
import { type RelaySummary, runRelay } from "../../functions/shared/relay/engine.ts";
import type { Retention } from "../../functions/shared/relay/sql/recordOutcomes.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { rowStates } from "../support/outboxRows.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { drain, queueDestination, TEST_RETENTION, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

const db = useTestDatabase();
const names = outboxNames();
const aws = useFakeSqs();
const RETENTION_MODES = ["keep", "delete"] as const satisfies readonly Retention[];

function options(overrides: Partial<PurgeOptions> = {}): PurgeOptions {
  return { ...DEFAULT_PURGE_OPTIONS, statementTimeoutMs: 2_000, ...overrides };
}

function longDeadline() {
  return Date.now() + 60_000;
}

// ---- rows, inserted in bulk with generate_series: 100k rows take about a second.

/** Published `hoursAgo` (plus a millisecond per row, so processed_at is distinct). */
async function insertPublished(count: number, hoursAgo: number): Promise<string[]> {
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at)
     select 'order', 'published-' || g, 'order.created', jsonb_build_object('n', g),
            now() - make_interval(hours => $2) - interval '1 minute',
            now() - make_interval(hours => $2) + g * interval '1 millisecond'
     from generate_series(1, $1::integer) as g
     returning id`,
    [count, hoursAgo],
  );
  return rows.map((row) => row.id);
}

/** Pending, created long ago (age alone never makes a row purgeable); some in backoff after failures. */
async function insertPending(count: number, aggregates: number, attempts = 0): Promise<string[]> {
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, attempts, available_at)
     select 'order', 'pending-' || (g % $2::integer), 'order.created', jsonb_build_object('n', g),
            now() - interval '400 hours', $3::integer,
            case when $3::integer > 0 then now() + interval '1 hour' else now() end
     from generate_series(1, $1::integer) as g
     returning id`,
    [count, aggregates, attempts],
  );
  return rows.map((row) => row.id);
}

async function insertDeadLetters(count: number, hoursAgo: number): Promise<string[]> {
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, attempts,
                                last_error, dead_lettered_at)
     select 'order', 'dead-' || g, 'order.created', '{}', now() - interval '500 hours', 10,
            'InvalidParameterValue', now() - make_interval(hours => $2)
     from generate_series(1, $1::integer) as g
     returning id`,
    [count, hoursAgo],
  );
  return rows.map((row) => row.id);
}

async function remainingIds(): Promise<string[]> {
  const { rows } = await db.pool.query<{ id: string }>("select id from outbox_events order by id");
  return rows.map((row) => row.id);
}

/**
 * The real pool, with every statement recorded per transaction, so tests can count DELETEs and their rows.
 * `afterDelete` runs once a DELETE has returned (to move a test clock or abort).
 */
function recordingPool(pool: pg.Pool, afterDelete: (deleted: number) => void = () => {}) {
  const transactions: string[][] = [];
  const deletes: number[] = [];
  const recording: SessionPool = {
    async connect(): Promise<SessionClient> {
      const client = await pool.connect();
      return {
        // biome-ignore lint/suspicious/noExplicitAny: pg's own signature, as in db.ts.
        async query(text: string, values?: unknown[]): Promise<any> {
          if (text.startsWith("begin")) transactions.push([]);
          const result = await client.query(text, values);
          // The published rows' DELETE is wrapped in a CTE that records the groups' high-water marks.
          const published = text.trim().startsWith("with deleted as");
          const statement = published ? "delete" : (text.trim().split(/\s/)[0] ?? "");
          transactions.at(-1)?.push(statement);
          if (statement === "delete") {
            const deleted = published ? Number(result.rows[0]?.deleted ?? 0) : (result.rowCount ?? 0);
            deletes.push(deleted);
            afterDelete(deleted);
          }
          return result;
        },
        release: (destroy) => client.release(destroy),
        on: (event, listener) => client.on(event, listener),
        off: (event, listener) => client.off(event, listener),
      };
    },
  };
  return { pool: recording, transactions, deletes };
}

describe("runPurge", () => {
  beforeEach(async () => {
    await db.pool.query("delete from outbox_events");
  });

  it("deletes exactly the published rows older than the retention; pending, recent and dead rows stay", async () => {
    const old = await insertPublished(30, 200);
    const recent = await insertPublished(20, 1);
    const pending = await insertPending(10, 4);
    const inBackoff = await insertPending(5, 2, 3);
    const dead = await insertDeadLetters(4, 1_000);

    const summary = await runPurge({ pool: db.pool, deadline: longDeadline() }, options());

    expect(summary).toMatchObject({
      deletedRows: 30,
      deletedDeadLetters: 0,
      batches: 1,
      stoppedBy: "drained",
    });
    expect(await remainingIds()).toEqual([...recent, ...pending, ...inBackoff, ...dead].sort());
    expect(old).toHaveLength(30);
  });

  it("deletes dead letters only with a dead-letter retention, and only those dead-lettered before it", async () => {
    const published = await insertPublished(3, 200);
    const oldDead = await insertDeadLetters(5, 300);
    const recentDead = await insertDeadLetters(2, 10);

    const kept = await runPurge({ pool: db.pool, deadline: longDeadline() }, options());
    expect(kept).toMatchObject({ deletedRows: 3, deletedDeadLetters: 0 });
    expect(await remainingIds()).toEqual([...oldDead, ...recentDead].sort());

    const purged = await runPurge(
      { pool: db.pool, deadline: longDeadline() },
      options({ deadLetterRetentionHours: 24 }),
    );

    expect(purged).toMatchObject({ deletedRows: 0, deletedDeadLetters: 5, stoppedBy: "drained" });
    expect(await remainingIds()).toEqual([...recentDead].sort());
    expect(published).toHaveLength(3);
  });

  it("deletes in statements of at most batchSize rows, each alone in its own short transaction", async () => {
    await insertPublished(12_345, 200);
    await insertDeadLetters(7, 300);
    const recorder = recordingPool(db.pool);

    const summary = await runPurge(
      { pool: recorder.pool, deadline: longDeadline() },
      options({ batchSize: 5_000, deadLetterRetentionHours: 24 }),
    );

    expect(recorder.deletes).toEqual([5_000, 5_000, 2_345, 7]);
    expect(summary).toMatchObject({ deletedRows: 12_345, deletedDeadLetters: 7, batches: 4 });
    const withDelete = recorder.transactions.filter((statements) => statements.includes("delete"));
    expect(withDelete).toHaveLength(4);
    for (const statements of withDelete) expect(statements).toEqual(["begin", "select", "delete", "commit"]);
  });

  it("pauses after each full batch for pausePercent of the time it took, and not at all with 0", async () => {
    await insertPublished(5_000, 200);
    const paced: number[] = [];
    const flatOut: number[] = [];

    const first = await runPurge(
      { pool: db.pool, deadline: longDeadline(), sleep: async (ms) => void paced.push(ms) },
      options({ batchSize: 2_000, pausePercent: 100, retentionHours: 1 }),
    );
    await insertPublished(5_000, 200);
    await runPurge(
      { pool: db.pool, deadline: longDeadline(), sleep: async (ms) => void flatOut.push(ms) },
      options({ batchSize: 2_000, pausePercent: 0, retentionHours: 1 }),
    );

    expect(first.batches).toBe(3);
    expect(paced).toHaveLength(2); // after the two full batches; the last, partial one means nothing is left
    expect(Math.min(...paced)).toBeGreaterThanOrEqual(1);
    expect(flatOut).toEqual([]);
  });

  it("never pauses past its deadline, however long the batch took", async () => {
    await insertPublished(5_000, 200);
    const pauses: number[] = [];
    // A test clock: each DELETE "takes" 1 s of it, so 1,000 % asks for a 10 s pause with 4 s left.
    let clock = 0;
    const recorder = recordingPool(db.pool, () => {
      clock += 1_000;
    });
    const summary = await runPurge(
      {
        pool: recorder.pool,
        deadline: 5_000,
        now: () => clock,
        sleep: async (ms) => {
          pauses.push(ms);
          clock += ms;
        },
      },
      options({ batchSize: 2_000, pausePercent: 1_000, retentionHours: 1, statementTimeoutMs: 1_000 }),
    );
    expect(pauses).toEqual([4_000]);
    expect(summary).toMatchObject({ batches: 1, stoppedBy: "deadline", durationMs: 5_000 });
  });

  it("starts a batch only while a whole statement timeout fits before the deadline", async () => {
    await insertPublished(1_000, 200);
    // A test clock that moves only when a batch runs: every DELETE "takes" one second.
    let clock = 0;
    const recorder = recordingPool(db.pool, () => {
      clock += 1_000;
    });

    const summary = await runPurge(
      { pool: recorder.pool, deadline: 3_500, now: () => clock },
      options({ batchSize: 100, statementTimeoutMs: 1_000 }),
    );

    // Batches start at 0, 1,000 and 2,000 ms; at 3,000 only 500 ms are left, less than a statement may take.
    expect(summary).toEqual({
      deletedRows: 300,
      deletedDeadLetters: 0,
      batches: 3,
      durationMs: 3_000,
      stoppedBy: "deadline",
    });
    expect(await remainingIds()).toHaveLength(700);
  });

  it("deletes nothing when the budget is already spent", async () => {
    await insertPublished(10, 200);
    const started = Date.now();

    const summary = await runPurge({ pool: db.pool, deadline: started + 500 }, options());

    expect(summary).toMatchObject({ batches: 0, deletedRows: 0, stoppedBy: "deadline" });
    expect(Date.now()).toBeLessThan(started + 500);
    expect(await remainingIds()).toHaveLength(10);
  });

  it("stops between batches when its signal is aborted", async () => {
    await insertPublished(500, 200);
    const stop = new AbortController();
    const recorder = recordingPool(db.pool, () => stop.abort());

    const summary = await runPurge(
      { pool: recorder.pool, deadline: longDeadline(), signal: stop.signal },
      options({ batchSize: 100 }),
    );

    expect(summary).toMatchObject({ batches: 1, deletedRows: 100, stoppedBy: "signal" });
    expect(await remainingIds()).toHaveLength(400);
  });

  it("skips rows locked elsewhere instead of waiting, and never touches the rows a relay has claimed", async () => {
    const old = await insertPublished(50, 200);
    const pending = await insertPending(20, 20);
    const lockedPublished = old.slice(0, 5);
    // A relay mid-round (pending rows locked) and an operator holding five old published rows.
    const other = await db.pool.connect();
    try {
      await other.query("begin");
      await other.query("select id from outbox_events where processed_at is null for update");
      await other.query("select id from outbox_events where id = any($1::uuid[]) for update", [
        lockedPublished,
      ]);

      // statement_timeout = 1 s: waiting on any of those locks would end the run in an error.
      const summary = await runPurge(
        { pool: db.pool, deadline: longDeadline() },
        options({ statementTimeoutMs: 1_000 }),
      );

      expect(summary).toMatchObject({ deletedRows: 45, stoppedBy: "drained" });
    } finally {
      await other.query("rollback");
      other.release();
    }
    expect(await remainingIds()).toEqual([...lockedPublished, ...pending].sort());
  });

  it("an uncommitted purge statement does not hold up the relay", async () => {
    await insertPublished(2_000, 200);
    await insertPending(30, 10);
    const queueUrl = await createFifoQueue(aws.sqs, "purge-beside-relay");
    const purging = await db.pool.connect();
    try {
      await purging.query("begin");
      const deleted = await purgePublished(purging, names, { before: new Date(), limit: 5_000 });
      expect(deleted).toBe(2_000);

      // The relay's statements run with lock_timeout = 2 s (testRelayOptions): a wait would fail its rounds.
      const summary = await drain(db.pool, aws.sqs, testRelayOptions(queueUrl));

      expect(summary).toMatchObject({ published: 30, failed: 0, failedRounds: 0, stoppedBy: "drained" });
    } finally {
      await purging.query("rollback");
      purging.release();
    }
  });

  it("gives up on a statement after its timeout and reports stoppedBy error, leaving the rows for next time", async () => {
    await insertPublished(300, 200);
    // A migration holding the table: the DELETE queues for its lock until statement_timeout ends it.
    const migration = await db.pool.connect();
    const started = performance.now();
    try {
      await migration.query("begin");
      await migration.query("lock table outbox_events in access exclusive mode");

      const summary = await runPurge(
        { pool: db.pool, deadline: longDeadline() },
        options({ statementTimeoutMs: 300 }),
      );

      expect(summary).toMatchObject({ batches: 0, deletedRows: 0, stoppedBy: "error" });
      expect(summary.error).toMatch(/canceling statement due to statement timeout/);
      expect(performance.now() - started).toBeLessThan(2_000);
    } finally {
      await migration.query("rollback");
      migration.release();
    }
    expect(await remainingIds()).toHaveLength(300);
  });
});

describe("a backlog of 100,000 published rows", () => {
  beforeAll(async () => {
    await db.pool.query("delete from outbox_events");
    await insertPublished(100_000, 200);
    await db.pool.query("analyze outbox_events");
  });

  it("is deleted through the partial indexes: no sequential scan of the table", async () => {
    for (const statement of Object.values(purgeStatements(names))) {
      const { rows } = await db.pool.query(`explain (format json) ${statement}`, [new Date(), 5_000]);
      const nodes = planNodes(rows[0]["QUERY PLAN"][0].Plan);

      expect(nodes.filter((node) => node["Node Type"] === "Seq Scan")).toEqual([]);
      expect(nodes.map((node) => node["Node Type"])).toContain("Tid Scan");
      const indexes = nodes.flatMap((node) => node["Index Name"] ?? []);
      expect(indexes.length).toBeGreaterThan(0);
      for (const index of indexes)
        expect(["outbox_processed_at", "outbox_dead_lettered_at"]).toContain(index);
    }
  });

  // In the tests' retention mode (TEST_RETENTION): `npm test` runs it in keep, `npm run test:retention` in delete,
  // where the relay deletes its own rows as it publishes while the purge deletes what keep left. One 100k backlog
  // per run of the file; what differs by mode is checked in both modes below, on a few rows.
  it("is purged while a relay publishes, and the relay's work completes in order", async () => {
    // 2,000 live events over 100 aggregates: the relay claims one head per aggregate per round, so it needs
    // 20+ rounds, and the purge starts when the first one ends.
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
       select 'order', 'live-' || (g % 100), 'order.created', jsonb_build_object('n', g)
       from generate_series(1, 2000) as g`,
    );
    const queueUrl = await createFifoQueue(aws.sqs, "purge-backlog");
    const before = await rowStates(db.pool);
    let purging: Promise<PurgeSummary> | undefined;
    let purgeStartedAtRound = 0;
    const roundsEnded: number[] = [];
    const started = performance.now();

    const relaySummary: RelaySummary = await runRelay(
      {
        pool: db.pool,
        destination: queueDestination(aws.sqs, { queueUrl }),
        deadline: longDeadline(),
        onRound: () => {
          roundsEnded.push(performance.now());
          if (purging === undefined) {
            purgeStartedAtRound = roundsEnded.length;
            purging = runPurge({ pool: db.pool, deadline: longDeadline() }, options({ batchSize: 5_000 }));
          }
        },
      },
      testRelayOptions(queueUrl),
    );
    const purgeSummary = await (purging as Promise<PurgeSummary>);
    const purgeEnded = performance.now();

    expect(purgeSummary).toMatchObject({ deletedRows: 100_000, batches: 21, stoppedBy: "drained" });
    expect(relaySummary).toMatchObject({
      published: 2_000,
      failed: 0,
      failedRounds: 0,
      stoppedBy: "drained",
    });
    expect(roundsEnded.length).toBeGreaterThan(purgeStartedAtRound);
    const snapshot = await readOutboxSnapshot(db.pool, options());
    expect(snapshot).toMatchObject({ pending: 0, deadLetters: 0, blockedAggregates: 0 });
    // What the relay published is left as rows (keep) or was deleted as it went (delete); counted either way.
    const { rows } = await db.pool.query("select count(*)::int as n from outbox_events");
    expect(rows[0].n).toBe({ keep: 2_000, delete: 0 }[TEST_RETENTION]);
    expect(await rowStates(db.pool)).toEqual({
      published: before.published - 100_000 + 2_000,
      pending: 0,
      dead: 0,
    });
    // Per-aggregate order at the queue: each group's payloads arrive in insert order.
    const byGroup = new Map<string, number[]>();
    for (const delivery of aws.fake.deliveries(queueUrl.split("/").pop())) {
      const list = byGroup.get(delivery.groupId ?? "") ?? [];
      list.push(JSON.parse(delivery.body).n);
      byGroup.set(delivery.groupId ?? "", list);
    }
    expect(byGroup.size).toBe(100);
    for (const list of byGroup.values()) expect(list).toEqual([...list].sort((a, b) => a - b));
    console.log(
      `[purge] ${TEST_RETENTION}: 100k rows in ${purgeSummary.durationMs} ms (${purgeSummary.batches} statements) beside a relay ` +
        `publishing 2,000 events in ${relaySummary.rounds} rounds; both done ${Math.round(
          Math.max(purgeEnded, roundsEnded.at(-1) ?? 0) - started,
        )} ms after start`,
    );
  });
});

describe.each(RETENTION_MODES)("the purge after a relay in retention mode %s", (retention) => {
  it("deletes old dead letters and what keep left; in delete the relay left none of its published rows", async () => {
    await db.pool.query("delete from outbox_events");
    const leftFromKeep = await insertPublished(10, 200);
    const oldDead = await insertDeadLetters(3, 300);
    const recentDead = await insertDeadLetters(2, 10);
    const live = await enqueueCommitted(
      db.pool,
      Array.from({ length: 20 }, (_, i) => anEvent({ aggregateId: `live-${i % 4}` })),
    );
    const queueUrl = await createFifoQueue(aws.sqs, `purge-after-${retention}`);
    const relayed = await drain(db.pool, aws.sqs, testRelayOptions(queueUrl, { retention }));
    // A week on: what the relay marked (keep) is past the retention too; in delete there is nothing to age.
    const { rowCount: marked } = await db.pool.query(
      "update outbox_events set processed_at = processed_at - interval '200 hours' where id = any($1::uuid[])",
      [live.map((row) => row.id)],
    );

    const summary = await runPurge(
      { pool: db.pool, deadline: longDeadline() },
      options({ deadLetterRetentionHours: 24 }),
    );

    expect(relayed.published).toBe(20);
    expect(aws.fake.deliveries(queueUrl.split("/").pop())).toHaveLength(20);
    expect(marked).toBe({ keep: 20, delete: 0 }[retention]);
    expect(summary).toMatchObject({
      deletedRows: leftFromKeep.length + (marked ?? 0),
      deletedDeadLetters: oldDead.length,
      stoppedBy: "drained",
    });
    expect(await remainingIds()).toEqual([...recentDead].sort());
  });
});

describe("purgeConfigFromEnv", () => {
  const env = { DATABASE_URL: "postgres://u:p@localhost:5432/app" };

  it("applies the documented defaults: a week of published rows, dead letters kept", () => {
    expect(purgeConfigFromEnv(env)).toEqual({
      database: {
        kind: "url",
        url: env.DATABASE_URL,
        tls: "verify-full",
        caFile: "/var/runtime/ca-cert.pem",
      },
      purge: {
        retentionHours: 168,
        deadLetterRetentionHours: null,
        batchSize: 5_000,
        statementTimeoutMs: 10_000,
        pausePercent: 100,
      },
      budgetMarginMs: 10_000,
    });
  });

  it("reads every variable", () => {
    const config = purgeConfigFromEnv({
      ...env,
      OUTBOX_SCHEMA: "sales",
      OUTBOX_TABLE: "sales_events",
      PURGE_RETENTION_HOURS: "24",
      PURGE_DEAD_LETTER_RETENTION_HOURS: "720",
      PURGE_BATCH_SIZE: "50000",
      PURGE_BUDGET_MARGIN_MS: "0",
      PURGE_STATEMENT_TIMEOUT_MS: "2500",
      PURGE_PAUSE_PERCENT: "0",
    });

    expect(config).toEqual({
      database: {
        kind: "url",
        url: env.DATABASE_URL,
        tls: "verify-full",
        caFile: "/var/runtime/ca-cert.pem",
      },
      purge: {
        schema: "sales",
        table: "sales_events",
        retentionHours: 24,
        deadLetterRetentionHours: 720,
        batchSize: 50_000,
        statementTimeoutMs: 2_500,
        pausePercent: 0,
      },
      budgetMarginMs: 0,
    });
  });

  it.each([
    [{ PURGE_BATCH_SIZE: "50001" }, /PURGE_BATCH_SIZE must be an integer from 1 to 50000, got "50001"/],
    [{ PURGE_BATCH_SIZE: "0" }, /PURGE_BATCH_SIZE must be an integer from 1 to 50000/],
    [{ PURGE_RETENTION_HOURS: "7d" }, /PURGE_RETENTION_HOURS must be an integer/],
    [
      { PURGE_DEAD_LETTER_RETENTION_HOURS: "0" },
      /PURGE_DEAD_LETTER_RETENTION_HOURS must be an integer from 1/,
    ],
    [{ PURGE_STATEMENT_TIMEOUT_MS: "50" }, /PURGE_STATEMENT_TIMEOUT_MS must be an integer from 100/],
    [{ PURGE_BUDGET_MARGIN_MS: "-1" }, /PURGE_BUDGET_MARGIN_MS must be an integer from 0/],
    [{ OUTBOX_TABLE: "events; drop table x" }, /table: .* is not an accepted identifier/],
    [{ DATABASE_URL: undefined }, /set DATABASE_URL .* or DATABASE_SECRET_ARN/],
  ])("refuses %o with an error naming the variable", (overrides, message) => {
    expect(() => purgeConfigFromEnv({ ...env, ...overrides })).toThrow(ConfigError);
    expect(() => purgeConfigFromEnv({ ...env, ...overrides })).toThrow(message);
  });
});

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  Plans?: PlanNode[];
}

function planNodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(planNodes)];
}
