import type pg from "pg";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";

export interface SteadyLoad {
  eventsPerSecond: number;
  durationMs: number;
  aggregates: number;
}

export interface ProducedEvents {
  /** Epoch ms at which each event's transaction had committed (COMMIT returned), by outbox id. */
  committedAt: Map<string, number>;
  /** Producer-side duration of each COMMIT, ms: what a NOTIFY trigger's commit-time lock would show in. */
  commitMs: number[];
}

/** Ticks this often; each tick commits one transaction with the events due since the last. */
const TICK_MS = 10;

/**
 * A service writing at a steady rate through the real write API: every 10 ms one transaction with the events
 * that fell due (3 per tick at 300/s, 30 at 3,000/s), each for a random aggregate. One writer, so writes per aggregate are
 * serialized as the README requires. The timer paces the load; it synchronizes nothing.
 */
export async function produceSteadily(pool: pg.Pool, load: SteadyLoad): Promise<ProducedEvents> {
  const produced: ProducedEvents = { committedAt: new Map(), commitMs: [] };
  const total = Math.round((load.eventsPerSecond * load.durationMs) / 1000);
  const started = performance.now();
  let written = 0;
  let n = 0;
  while (written < total) {
    const due = Math.min(total, Math.floor(((performance.now() - started) * load.eventsPerSecond) / 1000));
    if (due > written) {
      const events = Array.from({ length: due - written }, () => ({
        aggregateType: "order",
        aggregateId: `order-${Math.floor(Math.random() * load.aggregates)}`,
        eventType: "order.created",
        payload: { orderId: ++n, customer: `c-${n % 997}`, total: 4200, currency: "EUR" },
      }));
      const client = await pool.connect();
      try {
        await client.query("begin");
        const rows = await enqueue(client, events);
        const commitStarted = performance.now();
        await client.query("commit");
        produced.commitMs.push(performance.now() - commitStarted);
        const at = Date.now();
        for (const row of rows) produced.committedAt.set(row.id, at);
      } finally {
        client.release();
      }
      written = due;
    }
    const nextTick = started + Math.ceil((performance.now() - started + 1) / TICK_MS) * TICK_MS;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, nextTick - performance.now())));
  }
  return produced;
}
