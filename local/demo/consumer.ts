/**
 * The consumer of `npm start`, built on the package's consumer library ("aws-outbox-relay/consumer"): the same
 * createInboxHandler a Lambda would export, driven here by cli/dev/aws/sqsEventSource.ts the way Lambda's SQS event
 * source drives it (long-poll receive, SQS event, delete what did not fail), or for a Kinesis stream by
 * cli/dev/aws/kinesisEventSource.ts as Lambda's Kinesis event source does (GetRecords per shard, a Kinesis event,
 * resume from the lowest failed sequence number). Each event is applied to a read
 * model of its order in the transaction that records its outbox id in the inbox, so a redelivered message
 * (a relay that died after publishing, this consumer dying before deleting) finds its id and changes nothing.
 *
 * It also checks per-order ordering: each event carries the order's sequence number, and the read model
 * knows the last one applied; anything but last + 1 is an order violation. The handler runs with
 * `staleEvents: "skip"`: an event older (by outbox seq) than one of its order already applied is acknowledged
 * without reaching the read model (outcome "stale", counted as a late arrival and a violation), so the read
 * model only ever moves forward and needs no `greatest()` of its own. Through an EventBridge bus, a standard queue
 * or a standard topic order is not guaranteed, so there the summary reports `lateArrivals` as information.
 */
import { ChangeMessageVisibilityBatchCommand, type Message, type SQSClient } from "@aws-sdk/client-sqs";
import type pg from "pg";
import type { KinesisEventSource } from "../../cli/dev/aws/kinesisEventSource.ts";
import { pollOnce } from "../../cli/dev/aws/sqsEventSource.ts";
import {
  createInboxHandler,
  type InboxEvent,
  type InboxHandler,
  type InboxHandlerContext,
  migrateInbox,
  type RecordOutcome,
} from "../../functions/shared/consumer/index.ts";
import { ValidationError } from "../../functions/shared/outbox/errors.ts";

/** Where the consumer's deliveries come from: a queue (SQS event source) or a stream (Kinesis event source). */
export type ConsumerFeed = { sqs: SQSClient; queueUrl: string } | { stream: KinesisEventSource };

/**
 * Between two empty reads of a stream: GetRecords does not long-poll, and Lambda's event source polls each shard
 * about once a second when it is idle (AWS Lambda Developer Guide, "Polling and batching streams").
 */
const STREAM_IDLE_MS = 250;

/** The consumer's tables live apart from the outbox, as they would in the consuming service's own database. */
export const DEMO_CONSUMER_SCHEMA = "demo_consumer";

export async function createInboxSchema(db: pg.Pool): Promise<void> {
  await migrateInbox(db, { schema: DEMO_CONSUMER_SCHEMA });
  await db.query(
    `create table if not exists ${DEMO_CONSUMER_SCHEMA}.order_view (
       order_id text primary key,
       last_sequence integer not null,
       status text not null
     )`,
  );
}

export interface ConsumerStats {
  received: number;
  /** Distinct events consumed (inbox rows written): applied, or skipped as stale. */
  processed: number;
  /** Deliveries whose outbox id the inbox already had: skipped. */
  duplicates: number;
  /** Their outbox ids, so the summary can tell which fault caused them. */
  duplicateIds: string[];
  /** Events that did not arrive as their order's next sequence number. */
  orderViolations: number;
  /** Events that arrived after a later event of their order had been applied: skipped as stale (a subset of the violations). */
  lateArrivals: number;
  /** Records reported back as failed (and those skipped behind them in their group): SQS redelivers them. */
  failed: number;
  /** Commit (outbox created_at) to processed, per processed event, in ms. */
  endToEndLagMs: number[];
}

interface OrderEvent {
  orderId: string;
  sequence: number;
  status: string;
}

export class InboxConsumer {
  readonly stats: ConsumerStats = {
    received: 0,
    processed: 0,
    duplicates: 0,
    duplicateIds: [],
    orderViolations: 0,
    lateArrivals: 0,
    failed: 0,
    endToEndLagMs: [],
  };
  readonly #feed: ConsumerFeed;
  readonly #handler: InboxHandler;
  #crashNext: ((outboxIds: string[]) => void) | undefined;

  constructor(feed: ConsumerFeed, pool: pg.Pool) {
    this.#feed = feed;
    this.#handler = createInboxHandler((event, context) => this.#apply(event, context), {
      pool,
      schema: DEMO_CONSUMER_SCHEMA,
      staleEvents: "skip",
      onOutcome: (outcome) => this.#count(outcome),
    });
  }

  /**
   * Chaos: the next received batch is processed (inbox committed) but not deleted, as if the consumer died
   * right there; the messages become visible again at once (instead of after the visibility timeout) and are
   * delivered a second time. Resolves with their outbox ids. Queues only (the chaos of `--destination sqs-fifo`).
   */
  crashAfterNextBatch(): Promise<string[]> {
    return new Promise((resolve) => {
      this.#crashNext = resolve;
    });
  }

  /** Withdraws a crash request that has not happened yet. */
  cancelCrash(): void {
    this.#crashNext = undefined;
  }

  async run(signal: AbortSignal, onError: (error: unknown) => void): Promise<void> {
    while (!signal.aborted) {
      try {
        if ("stream" in this.#feed) {
          const result = await this.#feed.stream.pollOnce(this.#handler, signal);
          this.stats.received += result.received;
          if (result.received === 0) await idle(STREAM_IDLE_MS, signal);
          continue;
        }
        const { sqs, queueUrl } = this.#feed;
        // WaitTimeSeconds 1: a stop request is noticed promptly even where abort is not honoured mid-poll.
        // The crash is decided once the batch is processed, so a request made meanwhile applies to this batch.
        const result = await pollOnce(sqs, queueUrl, this.#handler, {
          waitSeconds: 1,
          signal,
          acknowledge: () => this.#crashNext === undefined,
        });
        this.stats.received += result.received;
        const crash = this.#crashNext;
        if (!result.acknowledged && crash !== undefined) {
          this.#crashNext = undefined;
          await makeVisibleAgain(sqs, queueUrl, result.messages);
          crash(result.messages.map((message) => message.MessageAttributes?.outboxId?.StringValue ?? ""));
        }
      } catch (error) {
        // Not deleted: SQS delivers the messages again after the visibility timeout, and the inbox dedups.
        if (!signal.aborted) onError(error);
      }
    }
  }

  /** The read model of the order, written in the inbox's transaction; stale events never get here. */
  async #apply(event: InboxEvent, { client }: InboxHandlerContext) {
    const order = orderEvent(event.payload);
    const { rows } = await client.query<{ last_sequence: number }>(
      `select last_sequence from ${DEMO_CONSUMER_SCHEMA}.order_view where order_id = $1 for update`,
      [order.orderId],
    );
    if (order.sequence !== (rows[0]?.last_sequence ?? 0) + 1) this.stats.orderViolations++;
    await client.query(
      `insert into ${DEMO_CONSUMER_SCHEMA}.order_view (order_id, last_sequence, status) values ($1, $2, $3)
       on conflict (order_id) do update set last_sequence = excluded.last_sequence, status = excluded.status`,
      [order.orderId, order.sequence, order.status],
    );
  }

  #count(outcome: RecordOutcome) {
    if (outcome.status === "processed") {
      this.stats.processed++;
      this.stats.endToEndLagMs.push(Date.now() - outcome.event.createdAt.getTime());
    } else if (outcome.status === "stale") {
      // Consumed (acknowledged, in the inbox) but not applied: it came after a later event of its order.
      this.stats.processed++;
      this.stats.lateArrivals++;
      this.stats.orderViolations++;
    } else if (outcome.status === "duplicate") {
      this.stats.duplicates++;
      this.stats.duplicateIds.push(outcome.event.id);
    } else if (outcome.status === "failed" || outcome.status === "skipped") {
      this.stats.failed++;
    }
  }
}

async function makeVisibleAgain(sqs: SQSClient, queueUrl: string, messages: Message[]) {
  await sqs.send(
    new ChangeMessageVisibilityBatchCommand({
      QueueUrl: queueUrl,
      Entries: messages.map((message, index) => ({
        Id: String(index),
        ReceiptHandle: message.ReceiptHandle,
        VisibilityTimeout: 0,
      })),
    }),
  );
}

/** Waits `ms`, or less when the run is stopped meanwhile. */
function idle(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

function orderEvent(payload: unknown): OrderEvent {
  const value = payload as Partial<OrderEvent> | null;
  if (
    typeof value?.orderId !== "string" ||
    typeof value.sequence !== "number" ||
    typeof value.status !== "string"
  ) {
    throw new ValidationError(
      "payload",
      "is not an order event of this demo ({ orderId, sequence, status })",
    );
  }
  return value as OrderEvent;
}
