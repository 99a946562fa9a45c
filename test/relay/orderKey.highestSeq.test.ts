import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { relayInvocation } from "../../functions/shared/relay/invocation.ts";
import { relayConfigFromEnv } from "../../functions/shared/relay/settings.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { relayLambdaEnv } from "../support/lambda.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { queueDestination } from "../support/relay.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

/**
 * Issue 28, finding 2: the order-key check compared the sequence with the seq of the most recently published row
 * only, so a sequence that ran backwards below a seq the table (or the purge's high-water marks) still holds went
 * unnoticed, and a forward restart was refused. The relay must compare the sequence's NEXT value with the
 * greatest seq ever used: pending, published, dead, and purged.
 */
const db = useTestDatabase();
const aws = useFakeSqs();
const SEQUENCE = "outbox_events_seq_seq";
const quiet = { info() {}, warn() {}, error() {} };
let queueUrl: string;

beforeAll(async () => {
  queueUrl = await createFifoQueue(aws.sqs, "order-key-highest");
});
beforeEach(async () => {
  await db.pool.query("delete from outbox_events");
  await db.pool.query(`delete from ${PRIVATE}.outbox_group_high_water`);
  await db.pool.query(`update ${PRIVATE}.outbox_deleted_on_publish set events = 0, highest_seq = null`);
  await db.pool.query(`alter sequence ${SEQUENCE} restart with 1`);
  aws.fake.clearDeliveries();
});

/** One relay invocation (what the Lambda and `outbox relay` run), draining. */
function invoke(retention = "keep") {
  const config = relayConfigFromEnv(
    relayLambdaEnv({
      DATABASE_URL: db.url,
      OUTBOX_QUEUE_URL: queueUrl,
      AWS_ENDPOINT_URL: aws.fake.url,
      RELAY_MODE: "drain",
      OUTBOX_RETENTION: retention,
    }),
  );
  return relayInvocation(
    {
      pool: db.pool,
      destination: queueDestination(aws.sqs, { queueUrl }),
      deadline: Date.now() + 10_000,
      logger: quiet,
    },
    config,
  );
}

/**
 * Rows put back with the seqs they had (a restore, a backlog moved between databases): written with the
 * commit-order trigger disabled, as `pg_restore --disable-triggers` does, so their seq is kept.
 */
async function restore(
  rows: { seq: number; state: "pending" | "published"; publishedMinutesAgo?: number }[],
) {
  const client = await db.pool.connect();
  try {
    await client.query("begin");
    await client.query("alter table outbox_events disable trigger outbox_commit_order");
    for (const row of rows) {
      await client.query(
        `insert into outbox_events (seq, aggregate_type, aggregate_id, event_type, payload, processed_at)
         overriding system value
         values ($1, 'order', 'restored', 'e', '{}', $2)`,
        [
          row.seq,
          row.state === "published" ? new Date(Date.now() - (row.publishedMinutesAgo ?? 0) * 60_000) : null,
        ],
      );
    }
    await client.query("alter table outbox_events enable always trigger outbox_commit_order");
    await client.query("commit");
  } finally {
    client.release();
  }
}

async function pendingSeqs(): Promise<string[]> {
  const { rows } = await db.pool.query<{ seq: string }>(
    "select seq from outbox_events where processed_at is null order by seq",
  );
  return rows.map((row) => row.seq);
}

describe("the order-key check sees every seq", () => {
  it("refuses when pending rows hold seqs above the sequence (a backlog restored or moved)", async () => {
    await restore([20, 21, 22, 23, 24].map((seq) => ({ seq, state: "pending" as const })));
    await enqueueCommitted(db.pool, anEvent({ aggregateId: "restored" }));

    await expect(invoke()).rejects.toMatchObject({ name: "OrderKeyError" });
    await expect(invoke()).rejects.toThrow(/seq 24/);
    expect(aws.fake.deliveries()).toEqual([]);
    expect(await pendingSeqs()).toHaveLength(6);
  });

  it("refuses a sequence whose next value is a seq already used (two rows would share it)", async () => {
    await restore([{ seq: 24, state: "pending" }]);
    // is_called = false: the next nextval() returns 24 itself.
    await db.pool.query(`alter sequence ${SEQUENCE} restart with 24`);

    await expect(invoke()).rejects.toMatchObject({ name: "OrderKeyError" });
    expect(aws.fake.deliveries()).toEqual([]);
  });

  it("refuses when every published row was purged but the group's high-water mark is above the sequence", async () => {
    await db.pool.query(
      `insert into ${PRIVATE}.outbox_group_high_water (aggregate_id, purged_published_seq) values ('order-1', 1002)`,
    );
    await enqueueCommitted(db.pool, anEvent({ aggregateId: "order-1" }));

    await expect(invoke()).rejects.toThrow(/order key ran backwards.*1002/);
    expect(aws.fake.deliveries()).toEqual([]);
  });

  it("refuses when the latest published row is not the highest seq (a delayed row published last)", async () => {
    await restore([
      { seq: 30, state: "published", publishedMinutesAgo: 60 },
      { seq: 10, state: "published", publishedMinutesAgo: 0 },
    ]);
    await db.pool.query(`select setval('${SEQUENCE}', 20)`);
    await enqueueCommitted(db.pool, anEvent({ aggregateId: "restored" }));

    await expect(invoke()).rejects.toThrow(/order key ran backwards.*seq 30/);
    expect(aws.fake.deliveries()).toEqual([]);
  });

  it("lets a forward restart through (is_called = false: the next seq is the restart value)", async () => {
    await enqueueCommitted(db.pool, anEvent({ aggregateId: "forward" }));
    await expect(invoke()).resolves.toMatchObject({ published: 1 });
    await db.pool.query(`alter sequence ${SEQUENCE} restart with 1000000`);
    // Before any event draws from it: the sequence reads is_called = false, last_value 1000000.
    await expect(invoke()).resolves.toMatchObject({ published: 0 });
    const event = await enqueueCommitted(db.pool, anEvent({ aggregateId: "forward" }));

    await expect(invoke()).resolves.toMatchObject({ published: 1 });
    const { rows } = await db.pool.query<{ seq: string }>("select seq from outbox_events where id = $1", [
      event.id,
    ]);
    expect(BigInt(rows[0]?.seq ?? 0)).toBeGreaterThanOrEqual(1_000_000n);
  });

  it("refuses when the relay deleted every published row (retention delete) and the sequence ran backwards", async () => {
    for (let n = 0; n < 3; n++) await enqueueCommitted(db.pool, anEvent({ aggregateId: "deleted" }));
    await expect(invoke("delete")).resolves.toMatchObject({ published: 3 });
    const { rows } = await db.pool.query<{ n: number }>("select count(*)::integer as n from outbox_events");
    expect(rows[0]?.n).toBe(0);
    await db.pool.query(`alter sequence ${SEQUENCE} restart with 1`);
    await enqueueCommitted(db.pool, anEvent({ aggregateId: "deleted" }));

    await expect(invoke("delete")).rejects.toMatchObject({ name: "OrderKeyError" });
    expect(aws.fake.deliveries()).toHaveLength(3);
  });
});
