import { SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeSqs, startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import type { Queryable } from "../../functions/shared/db/session.ts";
import { runRelay } from "../../functions/shared/relay/engine.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { waitFor } from "../chaos/support/waitFor.ts";
import { type CommittedEvent, checkCommitOrder } from "../support/commitOrder.ts";
import { type TestDatabase, useTestDatabase } from "../support/db.ts";
import { drain, queueDestination, testRelayOptions } from "../support/relay.ts";
import { openSession, type Session, waitsOnLock } from "../support/sessions.ts";
import { createFifoQueue } from "../support/sqs.ts";

// Two databases cloned from the migrated template: one as migrated, one with the commit-order trigger disabled
// (the schema before migration 0005), so the same scenario shows what the guarantee changes.
const guarded = useTestDatabase();
const unguarded = useTestDatabase();
let fake: FakeSqs;
let sqs: SQSClient;

beforeAll(async () => {
  fake = await startFakeSqs();
  sqs = new SQSClient({ ...LOCAL_AWS, endpoint: fake.url });
  await unguarded.pool.query("alter table outbox_events disable trigger outbox_commit_order");
});
afterAll(async () => {
  sqs.destroy();
  await fake.close();
});

const AGGREGATES = 4;
const RACES_PER_AGGREGATE = 6;
/** Every third race the first producer rolls back instead of committing: the second must still go through. */
const rollsBack = (race: number) => race % 3 === 2;

interface ScenarioResult {
  /** Per aggregate, in commit order. */
  committed: CommittedEvent[];
  /** Races in which the second producer was seen waiting on a lock at its INSERT. */
  secondWaited: number;
  /** Races in which the second producer's INSERT returned while the first was still open. */
  secondInserted: number;
  deliveries: ReturnType<FakeSqs["deliveries"]>;
}

/**
 * Producers that lock nothing and write plain SQL (no write API), racing on a few shared aggregates while the
 * real relay publishes to the SQS endpoint. Each race: producer 1 begins and inserts; producer 2 begins and
 * inserts into the same aggregate; as soon as producer 2's INSERT has returned, producer 2 commits BEFORE
 * producer 1, so commit order is the reverse of insert order. If producer 2 is instead seen waiting on a lock
 * (pg_locks), producer 1 finishes first and producer 2 then commits. Commits of one aggregate are issued one
 * after another, so the order in which they return is the commit order.
 */
async function runScenario(db: TestDatabase): Promise<ScenarioResult> {
  const queueUrl = await createFifoQueue(sqs, "order");
  const queueName = queueUrl.split("/").pop() as string;
  const stopRelay = new AbortController();
  const relay = runRelay(
    {
      pool: db.pool,
      destination: queueDestination(sqs, { queueUrl }),
      deadline: Date.now() + 120_000,
      signal: stopRelay.signal,
    },
    testRelayOptions(queueUrl, { mode: "dwell", parallelRounds: 2, idlePollMinMs: 1, idlePollMaxMs: 20 }),
  );
  // Lock checks of all the races at once go through the pool: one client runs one query at a time.
  const observer = db.pool;
  const result: ScenarioResult = { committed: [], secondWaited: 0, secondInserted: 0, deliveries: [] };
  try {
    const perAggregate = await Promise.all(
      Array.from({ length: AGGREGATES }, async (_, index) => {
        const aggregateId = `shared-${index}`;
        const [first, second] = [await openSession(db.url), await openSession(db.url)];
        const committed: CommittedEvent[] = [];
        try {
          for (let race = 0; race < RACES_PER_AGGREGATE; race++) {
            const outcome = await raceOnce(observer, first, second, aggregateId, rollsBack(race));
            committed.push(...outcome.committed);
            if (outcome.secondWaited) result.secondWaited++;
            else result.secondInserted++;
          }
        } finally {
          await first.client.end();
          await second.client.end();
        }
        return committed;
      }),
    );
    result.committed = perAggregate.flat();
    await waitFor(
      "the relay to publish every committed event",
      async () => (await pendingCount(observer)) === 0,
      30_000,
    );
  } finally {
    stopRelay.abort();
    await relay;
  }
  result.deliveries = fake.deliveries(queueName);
  return result;
}

async function raceOnce(
  observer: Queryable,
  first: Session,
  second: Session,
  aggregateId: string,
  firstRollsBack: boolean,
): Promise<{ committed: CommittedEvent[]; secondWaited: boolean }> {
  await first.client.query("begin");
  await second.client.query("begin");
  const firstEvent = await insertEvent(first, aggregateId);
  let secondEvent: CommittedEvent | undefined;
  const secondInsert = insertEvent(second, aggregateId).then((event) => {
    secondEvent = event;
    return event;
  });
  let secondWaited = false;
  await waitFor(
    "producer 2's INSERT to return or to wait on a lock",
    async () => {
      if (secondEvent !== undefined) return true;
      secondWaited = await waitsOnLock(observer, second.pid);
      return secondWaited;
    },
    10_000,
  );
  const endFirst = async () => {
    await first.client.query(firstRollsBack ? "rollback" : "commit");
    return firstRollsBack ? [] : [firstEvent];
  };
  if (!secondWaited) {
    // Nothing serialized the two: commit the later insert first.
    const event = await secondInsert;
    await second.client.query("commit");
    return { committed: [event, ...(await endFirst())], secondWaited };
  }
  const firstCommitted = await endFirst();
  const event = await secondInsert;
  await second.client.query("commit");
  return { committed: [...firstCommitted, event], secondWaited };
}

async function insertEvent(producer: Session, aggregateId: string): Promise<CommittedEvent> {
  const { rows } = await producer.client.query<{ id: string; seq: string }>(
    `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
     values ('order', $1, 'order.changed', jsonb_build_object('pid', pg_backend_pid()))
     returning id, seq`,
    [aggregateId],
  );
  const row = rows[0];
  if (row === undefined) throw new Error("insert returned no row");
  return { id: row.id, seq: BigInt(row.seq), aggregateId };
}

async function pendingCount(observer: Queryable): Promise<number> {
  const { rows } = await observer.query<{ n: number }>(
    "select count(*)::integer as n from outbox_events where processed_at is null and dead_lettered_at is null",
  );
  return rows[0]?.n ?? 0;
}

const RACES = AGGREGATES * RACES_PER_AGGREGATE;
const ROLLED_BACK =
  AGGREGATES * Array.from({ length: RACES_PER_AGGREGATE }, (_, i) => i).filter(rollsBack).length;

describe("the relay and the producers' aggregate locks", () => {
  it("publishes an aggregate's committed events while a producer holds that aggregate in an open transaction", async () => {
    const queueUrl = await createFifoQueue(sqs, "held");
    await guarded.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
       values ('order', 'held-1', 'order.created', '{}'), ('order', 'held-1', 'order.paid', '{}')`,
    );
    const producer = await openSession(guarded.url);
    try {
      await producer.client.query("begin");
      await insertEvent(producer, "held-1"); // holds held-1's lock until rollback

      const summary = await drain(guarded.pool, sqs, testRelayOptions(queueUrl));

      expect(summary.published).toBe(2);
    } finally {
      await producer.client.query("rollback");
      await producer.client.end();
    }
  });
});

describe("per-aggregate order of unserialized producers, through the relay to SQS", () => {
  it("with migration 0005: the second writer waits, and delivery order is commit order with seq increasing", async () => {
    const result = await runScenario(guarded);
    const report = checkCommitOrder(result.committed, result.deliveries);

    expect(result.secondWaited).toBe(RACES);
    expect(report.committed).toBe(2 * RACES - ROLLED_BACK);
    expect(report.lost).toEqual([]);
    expect(report.seqNotIncreasing).toEqual([]);
    expect(report.notCommitOrder).toEqual([]);
  });

  it("without it (trigger disabled): the same scenario commits out of seq order and every aggregate shows it", async () => {
    const result = await runScenario(unguarded);
    const report = checkCommitOrder(result.committed, result.deliveries);

    expect(result.secondInserted).toBe(RACES);
    expect(report.lost).toEqual([]);
    // Per aggregate either the later seq was delivered first, or delivery followed seq and not commit order.
    const disordered = new Set([
      ...report.seqNotIncreasing.map((violation) => violation.group),
      ...report.notCommitOrder.map((violation) => violation.group),
    ]);
    expect([...disordered].sort()).toEqual(Array.from({ length: AGGREGATES }, (_, i) => `shared-${i}`));
  });
});
