/**
 * The sample service of `npm start`: an orders service that writes its order row and the order's event in one
 * transaction with `enqueue`, the way a real producer uses the outbox.
 *
 * Writes to one order are serialized by the order row itself: an update takes the row lock first, so a second
 * writer of the same order waits, and outbox `seq` follows the order's own sequence (the assumption the relay's
 * per-aggregate ordering rests on, see README).
 */
import { randomBytes } from "node:crypto";
import type pg from "pg";
import { withTransaction } from "../../functions/shared/db/session.ts";
import type { OutboxLocation } from "../../functions/shared/outbox/names.ts";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { sleep } from "../../functions/shared/util/sleep.ts";

/** The order lifecycle; each step after `created` is an `order.updated` event. */
const STATUSES = ["created", "paid", "packed", "shipped", "delivered"] as const;

export interface OrderEvent {
  orderId: string;
  /** 1 for order.created, then +1 per update: the consumer checks it arrives in order. */
  sequence: number;
  status: (typeof STATUSES)[number];
  totalCents: number;
}

export async function createOrdersSchema(db: pg.Pool): Promise<void> {
  await db.query(
    `create table if not exists demo_orders (
       id text primary key,
       status text not null,
       sequence integer not null,
       total_cents integer not null,
       updated_at timestamptz not null default now()
     )`,
  );
}

export interface Written {
  id: string;
  orderId: string;
  sequence: number;
}

export class OrdersService {
  readonly #pool: pg.Pool;
  readonly #outbox: OutboxLocation;
  constructor(pool: pg.Pool, outbox: OutboxLocation = {}) {
    this.#pool = pool;
    this.#outbox = outbox;
  }

  /** Inserts the order and its `order.created` event; both commit or neither does. */
  placeOrder(orderId: string, totalCents: number): Promise<Written> {
    return withTransaction(this.#pool, async (client) => {
      await client.query(
        "insert into demo_orders (id, status, sequence, total_cents) values ($1, 'created', 1, $2)",
        [orderId, totalCents],
      );
      return this.#enqueue(client, "order.created", { orderId, sequence: 1, status: "created", totalCents });
    });
  }

  /**
   * Moves the order to its next status and enqueues `order.updated`. The UPDATE takes the row lock, so
   * concurrent writers of one order queue up here and their events get `seq` in the order's own order.
   * Returns undefined for an order already delivered.
   */
  advanceOrder(orderId: string): Promise<Written | undefined> {
    return withTransaction(this.#pool, async (client) => {
      const { rows } = await client.query<{ sequence: number; total_cents: number }>(
        `update demo_orders set sequence = sequence + 1, status = ($2::text[])[sequence + 1], updated_at = now()
         where id = $1 and sequence < cardinality($2::text[])
         returning sequence, total_cents`,
        [orderId, STATUSES],
      );
      const row = rows[0];
      if (row === undefined) return undefined;
      const status = STATUSES[row.sequence - 1] ?? "delivered";
      return this.#enqueue(client, "order.updated", {
        orderId,
        sequence: row.sequence,
        status,
        totalCents: row.total_cents,
      });
    });
  }

  async #enqueue(client: pg.PoolClient, eventType: string, event: OrderEvent): Promise<Written> {
    const { id } = await enqueue(
      client,
      { aggregateType: "order", aggregateId: event.orderId, eventType, payload: event },
      this.#outbox,
    );
    return { id, orderId: event.orderId, sequence: event.sequence };
  }
}

export const ORDER_LIFECYCLE_LENGTH = STATUSES.length;

export interface ProducerOptions {
  ratePerSecond: number;
  /** Orders in progress at once: more orders, more message groups in flight. */
  openOrders: number;
  /** Concurrent writers; they sometimes pick the same order, which the row lock serializes. */
  writers: number;
  signal: AbortSignal;
  onWritten(written: Written): void;
  onError(error: unknown): void;
}

/**
 * Writes events at a steady rate: each slot either places a new order or advances an open one (payment,
 * packing, shipping, delivery), so every order produces five events over its life.
 */
export async function runProducer(service: OrdersService, options: ProducerOptions): Promise<void> {
  const runTag = randomBytes(3).toString("hex");
  const open: string[] = [];
  let placed = 0;
  let slot = 0;
  const started = performance.now();
  const intervalMs = 1000 / options.ratePerSecond;

  const writer = async () => {
    while (!options.signal.aborted) {
      const due = started + slot++ * intervalMs;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait, options.signal);
      if (options.signal.aborted) return;
      try {
        if (open.length < options.openOrders || Math.random() < 0.1) {
          const orderId = `order-${runTag}-${++placed}`;
          const written = await service.placeOrder(orderId, 1_000 + Math.floor(Math.random() * 90_000));
          open.push(orderId);
          options.onWritten(written);
        } else {
          const index = Math.floor(Math.random() * open.length);
          const orderId = open[index] as string;
          const written = await service.advanceOrder(orderId);
          if (written === undefined || written.sequence >= ORDER_LIFECYCLE_LENGTH) {
            const at = open.indexOf(orderId);
            if (at >= 0) open.splice(at, 1);
          }
          if (written !== undefined) options.onWritten(written);
        }
      } catch (error) {
        options.onError(error);
      }
    }
  };
  await Promise.all(Array.from({ length: options.writers }, writer));
}
