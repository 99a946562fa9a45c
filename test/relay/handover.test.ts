import { randomUUID } from "node:crypto";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import {
  type HandoverRig,
  handoverConfig,
  type Invocation,
  kill,
  startInvocation,
} from "../support/handover.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

/**
 * Issue 41: an invocation hands over to a later one of its slot once that one completed a round, so about one
 * invocation dwells at a time instead of two; one that never completes a round takes nothing over.
 */
const db = useTestDatabase();
const aws = useFakeSqs();
let queueUrl: string;
let queueName: string;

beforeAll(async () => {
  queueUrl = await createFifoQueue(aws.sqs, "handover");
  queueName = queueUrl.split("/").pop() ?? "";
});
beforeEach(async () => {
  await db.pool.query("delete from outbox_events");
  await db.pool.query("delete from outbox_relay_handover");
  aws.fake.clearDeliveries();
});

const rig = (): HandoverRig => ({ databaseUrl: db.url, sqs: aws.sqs, sqsEndpoint: aws.fake.url, queueUrl });

/** One scheduled invocation of slot `slot`, on a pool of its own (a Lambda container's). */
let failedRound: () => void = () => {};
const invoke = (
  slot: number,
  startedAt: number,
  databaseUrl = db.url,
  extra: Record<string, string> = {},
): Invocation =>
  startInvocation(rig(), {
    slot,
    startedAt,
    databaseUrl,
    dwellMs: 60_000,
    config: handoverConfig(rig(), extra),
    onRoundFailed: () => failedRound(),
  });

/** When slot 0's holder started (the rig's explicit start times tell the invocations apart). */
async function slotHolderStarts(): Promise<number[]> {
  const { rows } = await db.pool.query<{ started_ms: string }>(
    "select (extract(epoch from started_at) * 1000)::bigint::text as started_ms from outbox_relay_handover where slot = 0",
  );
  return rows.map((row) => Number(row.started_ms));
}

function published() {
  return aws.fake.deliveries(queueName).filter((delivery) => !delivery.duplicate);
}

describe("hand-over between relay invocations", () => {
  it("an older invocation returns soon after a later one of its slot completes a round", async () => {
    const t0 = Date.now();
    const older = invoke(0, t0);
    await older.firstRound;
    const otherSlot = invoke(1, t0 + 1);
    await otherSlot.firstRound;
    const newer = invoke(0, t0 + 2);
    await newer.firstRound;

    const summary = await older.done;
    expect(summary.stoppedBy).toBe("handedOver");
    expect(Date.now() - t0).toBeLessThan(30_000);

    // The newer one dwells on and relays; the other slot's invocation is not handed over to anyone.
    const events = await enqueueCommitted(db.pool, [anEvent(), anEvent()]);
    await expect.poll(() => published().length, { timeout: 10_000 }).toBe(events.length);
    newer.stop.abort();
    otherSlot.stop.abort();
    expect((await newer.done).stoppedBy).toBe("signal");
    expect((await otherSlot.done).stoppedBy).toBe("signal");
  });

  it("a successor whose rounds fail, then dies, leaves the current one claiming", async () => {
    // A login that may not read the outbox: every round of its invocation fails, as one whose database path
    // broke right after it started.
    const role = `handover_broken_${randomUUID().slice(0, 8)}`;
    await db.pool.query(`create role ${role} login password 'x'`);
    await db.pool.query(`grant usage on schema ${PRIVATE} to ${role}`);
    await db.pool.query(`grant execute on function ${PRIVATE}.outbox_order_key_state() to ${role}`);
    const brokenUrl = new URL(db.url);
    brokenUrl.username = role;
    brokenUrl.password = "x";
    const t0 = Date.now();
    const current = invoke(0, t0);
    await current.firstRound;
    const failed = new Promise<void>((resolve) => {
      failedRound = resolve;
    });
    const successor = invoke(0, t0 + 1, brokenUrl.toString());
    // Its first round fails, or its start-up check does: either way it never completes a round.
    await Promise.race([failed, successor.done.catch(() => undefined)]);
    await kill(successor, db.pool);
    await successor.done.catch(() => undefined);

    const events = await enqueueCommitted(db.pool, [
      anEvent({ aggregateId: "a" }),
      anEvent({ aggregateId: "a" }),
    ]);
    await expect.poll(() => published().length, { timeout: 15_000 }).toBe(events.length);
    expect(published().map((delivery) => delivery.dedupId)).toEqual(events.map((event) => event.id));
    // The slot is the current one's once its proving period is over; the successor never held it.
    await expect.poll(() => slotHolderStarts(), { timeout: 10_000 }).toEqual([t0]);
    current.stop.abort();
    expect((await current.done).stoppedBy).toBe("signal");
  });

  it("a successor killed after its first round, within its proving period, leaves the current one claiming", async () => {
    // A proving period long enough that the successor is killed well inside it (after three completed rounds).
    const proving = { RELAY_HANDOVER_PROVING_MS: "3000" };
    const t0 = Date.now();
    const current = invoke(0, t0, db.url, proving);
    await current.firstRound;
    const successor = invoke(0, t0 + 1, db.url, proving);
    await successor.firstRound;
    while (successor.rounds.completed < 3) await successor.nextRound();
    await kill(successor, db.pool);
    await successor.done.catch(() => undefined);
    expect((successor.endedAt ?? Number.POSITIVE_INFINITY) - successor.startedAt).toBeLessThan(3_000);

    // The current one never saw a proved successor: the slot stays (or becomes, once its own period is over)
    // its own, and it claims on.
    await expect.poll(() => slotHolderStarts(), { timeout: 10_000 }).toEqual([t0]);
    const events = await enqueueCommitted(db.pool, [
      anEvent({ aggregateId: "a" }),
      anEvent({ aggregateId: "a" }),
    ]);
    await expect.poll(() => published().length, { timeout: 15_000 }).toBe(events.length);
    expect(published().map((delivery) => delivery.dedupId)).toEqual(events.map((event) => event.id));
    expect(current.endedAt).toBeUndefined();
    current.stop.abort();
    expect((await current.done).stoppedBy).toBe("signal");
  });

  it("with RELAY_IDLE_STOP_MS, an invocation that claims nothing for that long returns before its deadline", async () => {
    const t0 = Date.now();
    const idle = invoke(0, t0, db.url, { RELAY_IDLE_STOP_MS: "1000" });
    const summary = await idle.done;
    expect(summary.stoppedBy).toBe("idle");
    expect(Date.now() - t0).toBeLessThan(30_000);
  });
});
