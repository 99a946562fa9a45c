import pg from "pg";
import { ValidationError } from "../../../functions/shared/outbox/errors.ts";
import { enqueue, type OutboxEvent } from "../../../functions/shared/produce/enqueue.ts";

/** One committed event, as the ledger needs it. */
export interface WrittenEvent {
  id: string;
  seq: bigint;
  aggregateId: string;
}

export interface ProducerLoad {
  events: number;
  aggregates: number;
  /** Writers; aggregate i belongs to writer i % writers, so each aggregate's writes are serialized. */
  writers: number;
  eventsPerTransaction: number;
  /** Pace across all writers; spreads the writing over the faults instead of front-loading it. */
  eventsPerSecond: number;
  /**
   * Writers that do not serialize their writes per aggregate (the order issue): every writer draws aggregates
   * at random from all of them and locks nothing. Even-numbered writers use the write API with several
   * aggregates per transaction; odd-numbered ones insert with plain SQL, one aggregate per transaction, like a
   * service written in another language. The database's commit-order trigger has to order them.
   */
  unserialized?: boolean;
  /** A random pause of up to this many ms between a transaction's INSERT and its COMMIT (load shaping). */
  maxHoldMs?: number;
}

export interface ProducerStats {
  transactions: number;
  /** Transactions that failed (connection lost, server restarting) and were retried. */
  retries: number;
  /** COMMITs whose outcome was unknown (connection lost during COMMIT), resolved by reading the ids back. */
  ambiguousCommits: number;
}

const RETRY_PAUSE_MS = 50;

type Insert = (
  client: pg.PoolClient,
  events: OutboxEvent<unknown>[],
) => Promise<{ id: string; seq: bigint }[]>;

/** One aggregate's events in one INSERT, without the write API (so RETURNING's row order does not matter). */
async function insertPlainSql(client: pg.PoolClient, events: OutboxEvent<unknown>[]) {
  const { rows } = await client.query<{ id: string; seq: string }>(
    `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
     select e.aggregate_type, e.aggregate_id, e.event_type, e.payload
     from unnest($1::text[], $2::text[], $3::text[], $4::jsonb[]) with ordinality
          as e(aggregate_type, aggregate_id, event_type, payload, ord)
     order by e.ord
     returning id, seq`,
    [
      events.map((event) => event.aggregateType),
      events.map((event) => event.aggregateId),
      events.map((event) => event.eventType),
      events.map((event) => JSON.stringify(event.payload)),
    ],
  );
  return rows.map((row) => ({ id: row.id, seq: BigInt(row.seq) }));
}
const GIVE_UP_MS = 60_000;

/**
 * Services writing events through the real write API while the chaos happens, recording every event whose
 * transaction committed: the ledger's "written" side. Writers ride through connection errors like a careful
 * service would: a failed transaction is retried with a fresh connection; when the connection died during
 * COMMIT (outcome unknown) the event ids are looked up once the database answers again, so an event is counted
 * written if and only if it is in the table, and never written twice.
 */
export class Producers {
  readonly written: WrittenEvent[] = [];
  readonly stats: ProducerStats = { transactions: 0, retries: 0, ambiguousCommits: 0 };
  readonly #pool: pg.Pool;
  readonly #load: ProducerLoad;
  #done: Promise<void> | undefined;

  constructor(databaseUrl: string, load: ProducerLoad) {
    this.#load = load;
    this.#pool = new pg.Pool({
      connectionString: databaseUrl,
      max: load.writers + 1,
      connectionTimeoutMillis: 2_000,
    });
    // Sessions ended by a Postgres restart report errors on their own: heard here, handled at the failing query.
    this.#pool.on("error", () => {});
    this.#pool.on("connect", (client) => client.on("error", () => {}));
  }

  start(): void {
    const started = performance.now();
    const perWriter = Math.ceil(this.#load.events / this.#load.writers);
    this.#done = Promise.all(
      Array.from({ length: this.#load.writers }, (_, writer) =>
        this.#write(writer, Math.min(perWriter, this.#load.events - writer * perWriter), started),
      ),
    ).then(() => {});
  }

  /** Resolves when every writer has committed its share. */
  finished(): Promise<void> {
    return this.#done ?? Promise.resolve();
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }

  async #write(writer: number, count: number, started: number) {
    const { aggregates, writers, eventsPerTransaction, eventsPerSecond, unserialized } = this.#load;
    const ownAggregates = Math.ceil((aggregates - writer) / writers);
    const plainSql = unserialized === true && writer % 2 === 1;
    for (let n = 0; n < count; n += eventsPerTransaction) {
      const events: OutboxEvent<unknown>[] = [];
      const transactionAggregate = Math.floor(Math.random() * aggregates);
      for (let i = n; i < Math.min(count, n + eventsPerTransaction); i++) {
        const aggregate = plainSql
          ? transactionAggregate
          : unserialized
            ? Math.floor(Math.random() * aggregates)
            : writer + writers * (i % ownAggregates);
        events.push({
          aggregateType: "order",
          aggregateId: `order-${aggregate}`,
          eventType: "order.changed",
          payload: { writer, i },
        });
      }
      // Pace: this writer's share of the total rate. Load generation only; nothing waits on it.
      const dueAt = started + ((n * writers) / eventsPerSecond) * 1000;
      const wait = dueAt - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      this.written.push(...(await this.#commit(events, plainSql ? insertPlainSql : enqueue)));
    }
  }

  async #commit(events: OutboxEvent<unknown>[], insert: Insert): Promise<WrittenEvent[]> {
    const giveUpAt = Date.now() + GIVE_UP_MS;
    for (;;) {
      let inserted: { id: string; seq: bigint }[] | undefined;
      let client: pg.PoolClient | undefined;
      try {
        client = await this.#pool.connect();
        await client.query("begin");
        inserted = await insert(client, events);
        const holdMs = Math.random() * (this.#load.maxHoldMs ?? 0);
        if (holdMs > 0) await new Promise((resolve) => setTimeout(resolve, holdMs));
        await client.query("commit");
        client.release();
        this.stats.transactions++;
        return inserted.map((row, i) => ({ ...row, aggregateId: events[i]?.aggregateId as string }));
      } catch (error) {
        client?.release(true);
        if (error instanceof ValidationError || Date.now() > giveUpAt) throw error;
        this.stats.retries++;
        if (inserted !== undefined) {
          // The INSERT succeeded; whether COMMIT did is unknown. The table knows.
          this.stats.ambiguousCommits++;
          const committed = await this.#committed(
            inserted.map((row) => row.id),
            giveUpAt,
          );
          if (committed) {
            this.stats.transactions++;
            return inserted.map((row, i) => ({ ...row, aggregateId: events[i]?.aggregateId as string }));
          }
        }
        await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
      }
    }
  }

  /** Whether these ids (one transaction: all or none) are in the table, asking until the database answers. */
  async #committed(ids: string[], giveUpAt: number): Promise<boolean> {
    for (;;) {
      try {
        const { rows } = await this.#pool.query<{ n: number }>(
          "select count(*)::integer as n from outbox_events where id = any($1::uuid[])",
          [ids],
        );
        return (rows[0]?.n ?? 0) > 0;
      } catch (error) {
        if (Date.now() > giveUpAt) throw error;
        await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
      }
    }
  }
}
