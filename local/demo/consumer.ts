/**
 * The consumer of `npm start`: receives with the real SDK (long poll), processes each event idempotently and
 * deletes it only after processing committed. Idempotency is an inbox table keyed by the outbox id (the
 * `outboxId` message attribute): the inbox row and the effect (a read model of the order) commit together, so
 * a redelivered message finds its id taken and changes nothing. That is what makes at-least-once delivery
 * (a relay that died after publishing, a consumer that died before deleting) safe.
 *
 * It also checks per-order ordering: each event carries the order's sequence number, and the read model
 * knows the last one applied; anything but last + 1 is an order violation.
 */
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import type pg from "pg";

export async function createInboxSchema(db: pg.Pool): Promise<void> {
  await db.query(
    `create table if not exists demo_inbox (
       outbox_id uuid primary key,
       order_id text,
       sequence integer,
       received_at timestamptz not null default now()
     )`,
  );
  await db.query(
    `create table if not exists demo_order_view (
       order_id text primary key,
       last_sequence integer not null,
       status text not null
     )`,
  );
}

export interface ConsumerStats {
  received: number;
  /** Distinct events processed (inbox rows written). */
  processed: number;
  /** Deliveries whose outbox id the inbox already had: skipped. */
  duplicates: number;
  /** Their outbox ids, so the summary can tell which fault caused them. */
  duplicateIds: string[];
  /** Events that did not arrive as their order's next sequence number. */
  orderViolations: number;
  /** Messages without an outboxId attribute or with a body this demo did not write: deleted, not counted. */
  foreign: number;
  /** Commit (outbox created_at) to processed, per processed event, in ms. */
  endToEndLagMs: number[];
}

interface OrderEvent {
  orderId: string;
  sequence: number;
  status: string;
}

type Outcome = "processed" | "duplicate" | "foreign";

export class InboxConsumer {
  readonly stats: ConsumerStats = {
    received: 0,
    processed: 0,
    duplicates: 0,
    duplicateIds: [],
    orderViolations: 0,
    foreign: 0,
    endToEndLagMs: [],
  };
  readonly #sqs: SQSClient;
  readonly #queueUrl: string;
  readonly #pool: pg.Pool;
  #crashNext: ((outboxIds: string[]) => void) | undefined;

  constructor(sqs: SQSClient, queueUrl: string, pool: pg.Pool) {
    this.#sqs = sqs;
    this.#queueUrl = queueUrl;
    this.#pool = pool;
  }

  /**
   * Chaos: the next received batch is processed (inbox committed) but not deleted, as if the consumer died
   * right there; the messages become visible again at once (instead of after the visibility timeout) and are
   * delivered a second time. Resolves with their outbox ids.
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
      let messages: Message[];
      try {
        const response = await this.#sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: this.#queueUrl,
            MaxNumberOfMessages: 10,
            // Short enough that a stop request is noticed promptly even where abort is not honoured mid-poll.
            WaitTimeSeconds: 1,
            MessageAttributeNames: ["All"],
          }),
          { abortSignal: signal },
        );
        messages = response.Messages ?? [];
      } catch (error) {
        if (!signal.aborted) onError(error);
        continue;
      }
      if (messages.length === 0) continue;
      this.stats.received += messages.length;
      try {
        // In received order: FIFO hands out a group's messages in order, and processing must keep it.
        for (const message of messages) this.#count(message, await this.#process(message));
        const crash = this.#crashNext;
        if (crash !== undefined) {
          this.#crashNext = undefined;
          await this.#makeVisibleAgain(messages);
          crash(messages.map((message) => message.MessageAttributes?.outboxId?.StringValue ?? ""));
          continue;
        }
        await this.#sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: this.#queueUrl,
            Entries: messages.map((message, index) => ({
              Id: String(index),
              ReceiptHandle: message.ReceiptHandle,
            })),
          }),
        );
      } catch (error) {
        // Not deleted: SQS delivers the messages again after the visibility timeout, and the inbox dedups.
        onError(error);
      }
    }
  }

  #count(message: Message, outcome: Outcome) {
    if (outcome === "processed") this.stats.processed++;
    else if (outcome === "foreign") this.stats.foreign++;
    else {
      this.stats.duplicates++;
      this.stats.duplicateIds.push(message.MessageAttributes?.outboxId?.StringValue ?? "");
    }
  }

  /** Inbox row + effect in one transaction; a known outbox id means a redelivery: nothing to do. */
  async #process(message: Message): Promise<Outcome> {
    const outboxId = message.MessageAttributes?.outboxId?.StringValue;
    const event = parseOrderEvent(message.Body);
    if (outboxId === undefined || event === undefined) return "foreign";
    const client = await this.#pool.connect();
    try {
      await client.query("begin");
      const { rowCount } = await client.query(
        `insert into demo_inbox (outbox_id, order_id, sequence) values ($1, $2, $3)
         on conflict (outbox_id) do nothing`,
        [outboxId, event.orderId, event.sequence],
      );
      if (rowCount === 0) {
        await client.query("rollback");
        return "duplicate";
      }
      const { rows } = await client.query<{ last_sequence: number }>(
        "select last_sequence from demo_order_view where order_id = $1 for update",
        [event.orderId],
      );
      const expected = (rows[0]?.last_sequence ?? 0) + 1;
      if (event.sequence !== expected) this.stats.orderViolations++;
      await client.query(
        `insert into demo_order_view (order_id, last_sequence, status) values ($1, $2, $3)
         on conflict (order_id) do update
           set last_sequence = greatest(demo_order_view.last_sequence, excluded.last_sequence),
               status = case when excluded.last_sequence > demo_order_view.last_sequence
                             then excluded.status else demo_order_view.status end`,
        [event.orderId, event.sequence, event.status],
      );
      await client.query("commit");
    } catch (error) {
      await client.query("rollback").catch(() => {});
      throw error;
    } finally {
      client.release();
    }
    const createdAt = Date.parse(message.MessageAttributes?.createdAt?.StringValue ?? "");
    if (Number.isFinite(createdAt)) this.stats.endToEndLagMs.push(Date.now() - createdAt);
    return "processed";
  }

  async #makeVisibleAgain(messages: Message[]) {
    await this.#sqs.send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: this.#queueUrl,
        Entries: messages.map((message, index) => ({
          Id: String(index),
          ReceiptHandle: message.ReceiptHandle,
          VisibilityTimeout: 0,
        })),
      }),
    );
  }
}

function parseOrderEvent(body: string | undefined): OrderEvent | undefined {
  try {
    const value = JSON.parse(body ?? "") as Partial<OrderEvent>;
    if (
      typeof value.orderId === "string" &&
      typeof value.sequence === "number" &&
      typeof value.status === "string"
    ) {
      return value as OrderEvent;
    }
  } catch {
    // not ours
  }
  return undefined;
}
