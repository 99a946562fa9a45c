import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { RelayConfig } from "../../functions/shared/relay/settings.ts";
import { useTestDatabase } from "../support/db.ts";
import {
  aliveOver,
  at,
  compareDeliveries,
  type HandoverRig,
  handoverConfig,
  type Invocation,
  kill,
  scaledDwellMs,
  startInvocation,
  steadyProducer,
} from "../support/handover.ts";
import { seededRandom } from "../support/seededRandom.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

/**
 * Issue 41: the hand-over under the schedule it exists for. EventBridge fires tick k somewhere in
 * [k·T, (k+1)·T); here T is scaled to 2 s and each tick starts the real relay invocation (engine, StopWatch,
 * relay_handover) dwelling relayTiming's scaled cap, while a producer commits steadily.
 */
const TICK_MS = 2_000;
const db = useTestDatabase();
const aws = useFakeSqs();
let rig: HandoverRig;
let queueName: string;

beforeAll(async () => {
  const queueUrl = await createFifoQueue(aws.sqs, "handover-schedule");
  queueName = queueUrl.split("/").pop() ?? "";
  rig = { databaseUrl: db.url, sqs: aws.sqs, sqsEndpoint: aws.fake.url, queueUrl };
});
beforeEach(async () => {
  await db.pool.query("delete from outbox_events");
  await db.pool.query("delete from outbox_relay_handover");
  aws.fake.clearDeliveries();
});

const deliveries = () => aws.fake.deliveries(queueName);

/** What the proving period adds to the mean alive: the period and at most one idle poll, over a tick. */
const provingCost = (config: RelayConfig) =>
  (config.handoverProvingMs + config.relay.idlePollMaxMs) / TICK_MS;

async function stopAll(invocations: readonly Invocation[]) {
  for (const invocation of invocations) invocation.stop.abort();
  return Promise.all(invocations.map((invocation) => invocation.done));
}

describe("hand-over under the schedule", () => {
  it("ticks at k·T + U[0,T): nothing lost, duplicated or reordered, never none alive, about one alive", async () => {
    const config = handoverConfig(rig);
    const dwellMs = scaledDwellMs(TICK_MS, config);
    const random = seededRandom(41);
    const t0 = Date.now() + 200;
    const ticks = Array.from({ length: 7 }, (_, k) => t0 + k * TICK_MS + random() * TICK_MS);
    const producer = steadyProducer(db.pool, { intervalMs: 25, groups: 8 });
    const invocations: Invocation[] = [];
    for (const tick of ticks) {
      await at(tick);
      invocations.push(startInvocation(rig, { dwellMs, config }));
    }
    // One more tick interval of load for the last invocation alone, then everything committed must arrive.
    await at((ticks.at(-1) ?? t0) + TICK_MS);
    const committed = await producer.stop();
    const end = Date.now();
    await expect.poll(() => compareDeliveries(committed, deliveries()).lost, { timeout: 15_000 }).toBe(0);
    const alive = aliveOver(invocations, invocations[0]?.startedAt ?? t0, end);
    const summaries = await stopAll(invocations);

    const result = compareDeliveries(committed, deliveries());
    expect(committed.length).toBeGreaterThan(200);
    expect(result).toMatchObject({ lost: 0, duplicates: 0, reordered: 0 });
    expect(alive.noneAliveMs).toBe(0);
    // Measured 1.26 before the proving period; 1.6 with it under load ~20. Its cost: the period, ended by the first
    // round completing after it (up to one idle poll later), over T. Without the hand-over each invocation claims
    // until its cap (2T + the allowance): 1.85 before the allowance, ~2 in a long run.
    expect(alive.meanAlive).toBeLessThan(1.5 + provingCost(config));
    // Every invocation but the last handed over to its successor (none reached its dwell cap).
    expect(summaries.slice(0, -1).map((summary) => summary.stoppedBy)).toEqual(
      Array(ticks.length - 1).fill("handedOver"),
    );
  }, 60_000);

  it("every third successor killed as it completes its first round: nothing lost, duplicated or reordered, latency ≤ 2T + a start-up", async () => {
    const config = handoverConfig(rig);
    const dwellMs = scaledDwellMs(TICK_MS, config);
    const random = seededRandom(4141);
    const t0 = Date.now() + 200;
    const ticks = Array.from({ length: 7 }, (_, k) => t0 + k * TICK_MS + random() * TICK_MS);
    const producer = steadyProducer(db.pool, { intervalMs: 25, groups: 8 });
    const invocations: Invocation[] = [];
    const killed: Promise<void>[] = [];
    for (const [index, tick] of ticks.entries()) {
      await at(tick);
      const invocation = startInvocation(rig, { dwellMs, config });
      invocations.push(invocation);
      // Mid-hand-over: its claim of the slot is in flight, or done, when its sessions end.
      if (index % 3 === 2) killed.push(invocation.firstRound.then(() => kill(invocation, db.pool)));
    }
    await at((ticks.at(-1) ?? t0) + TICK_MS);
    const committed = await producer.stop();
    await Promise.all(killed);
    await expect.poll(() => compareDeliveries(committed, deliveries()).lost, { timeout: 15_000 }).toBe(0);
    const alive = aliveOver(invocations, invocations[0]?.startedAt ?? t0, Date.now());
    await stopAll(invocations).catch(() => undefined);

    const result = compareDeliveries(committed, deliveries());
    expect(result).toMatchObject({ lost: 0, duplicates: 0, reordered: 0 });
    // Killed at its first round, inside its proving period, a successor never takes the slot: its predecessor
    // claims on. (Killed after the period, it would leave the slot to the next tick, at most 2T away, issue 41's
    // bound, plus that invocation's start-up: measured 2.8-3.2 s before the proving period.)
    expect(Math.max(...result.latencyMs.values())).toBeLessThanOrEqual(2 * TICK_MS + 1_000);
    expect(alive.meanAlive).toBeLessThan(1.7 + provingCost(config));
  }, 60_000);

  it("a late tick leaves no gap: the holder claims past the nominal next tick until its successor proves itself", async () => {
    const config = handoverConfig(rig);
    const dwellMs = scaledDwellMs(TICK_MS, config);
    const t0 = Date.now();
    const holder = startInvocation(rig, { dwellMs, config });
    await holder.firstRound;
    // The next tick is due at t0 + T but fires late in its window, at t0 + 1.6T; events committed in between
    // have only the holder to publish them. (The tick at the window's very end is relayTiming's replay in
    // test/infra/outboxRelay.test.ts: the cap lets the holder claim until 2T + the successor's start-up and proving
    // period, whether or not that successor has proved itself by then.)
    await at(t0 + TICK_MS);
    const producer = steadyProducer(db.pool, { intervalMs: 40, groups: 4 });
    await at(t0 + 1.6 * TICK_MS);
    const inGap = [...producer.committed];
    const successor = startInvocation(rig, { dwellMs, config });
    const provedAt = await successor.firstRound;
    const summary = await holder.done;
    const committed = await producer.stop();
    await expect.poll(() => compareDeliveries(committed, deliveries()).lost, { timeout: 10_000 }).toBe(0);
    const end = Date.now();
    const [successorSummary] = await stopAll([successor]);

    // It returned only once its successor had proved itself: on reading the slot, or at its cap if that came
    // first (it reads the slot once a second).
    expect(["handedOver", "deadline"]).toContain(summary.stoppedBy);
    expect(holder.endedAt).toBeGreaterThanOrEqual(provedAt);
    expect(successorSummary?.stoppedBy).toBe("signal");
    expect(aliveOver([holder, successor], holder.startedAt, end).noneAliveMs).toBe(0);
    const result = compareDeliveries(committed, deliveries());
    expect(result).toMatchObject({ lost: 0, duplicates: 0, reordered: 0 });
    // Published by the holder as they came (its idle poll is at most 250 ms), not at the late tick.
    expect(inGap.length).toBeGreaterThan(10);
    const gapLatencies = inGap.map((event) => result.latencyMs.get(event.id) ?? Number.POSITIVE_INFINITY);
    expect(Math.max(...gapLatencies)).toBeLessThan(TICK_MS / 2);
  }, 60_000);
});
