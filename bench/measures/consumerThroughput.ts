import { SendMessageBatchCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type pg from "pg";
import { pollOnce } from "../../cli/dev/aws/sqsEventSource.ts";
import {
  createInboxHandler,
  type InboxEvent,
  type InboxLambdaHandler,
  migrateInbox,
  type SqsBatchResponse,
  type SqsEvent,
} from "../../functions/shared/consumer/index.ts";
import { messageAttributes } from "../../functions/shared/outbox/message.ts";
import { createBenchQueue, relaySqsClient } from "../lib/sqsClient.ts";
import { type Repeated, repeated } from "../lib/stats.ts";
import { markdownTable } from "../lib/table.ts";

/**
 * (9) Consumer throughput: records per second through an inbox handler against a plain handler that does the
 * same write, in the same run, on the same queue shape. Both read relay-shaped messages (functions/shared/
 * sqsMessage.ts) from the in-process SQS endpoint through cli/dev/aws/sqsEventSource.ts, the way Lambda's event
 * source calls a function: `pollers` invocations at a time, 10 records each, failed records left for SQS.
 *
 * - plain: per record, JSON.parse of the body and one autocommitted INSERT of the effect, one record after
 *   another. What a consumer without deduplication costs; it applies a redelivered event twice.
 * - inbox: createInboxHandler with the same INSERT as the user's handler: per record a transaction (begin,
 *   timeouts, inbox insert, the effect, commit and its ROLLBACK check), the handler's statements through the
 *   transaction-control guard, groups side by side (groupConcurrency 1 and the default 4); and with
 *   `staleEvents: "skip"`, one more upsert per record (the aggregate's high-water mark).
 */
export interface ConsumerShape {
  messages: number;
  groups: number;
  /** Concurrent invocations (Lambda's maxConcurrency for the event source). */
  pollers: number;
}

export type ConsumerVariant =
  | "plain"
  | "inbox, groupConcurrency 1"
  | "inbox, groupConcurrency 4"
  | "inbox, groupConcurrency 4, staleEvents skip";
export const CONSUMER_VARIANTS: ConsumerVariant[] = [
  "plain",
  "inbox, groupConcurrency 1",
  "inbox, groupConcurrency 4",
  "inbox, groupConcurrency 4, staleEvents skip",
];

export interface ConsumerThroughput {
  shape: ConsumerShape;
  variants: { variant: ConsumerVariant; recordsPerSecond: Repeated }[];
}

const SCHEMA = "bench_consumer";

export async function prepareConsumerBench(pool: pg.Pool): Promise<void> {
  await migrateInbox(pool, { schema: SCHEMA });
  await pool.query(
    `create table if not exists ${SCHEMA}.effects (outbox_id uuid not null, aggregate_id text not null, amount int not null)`,
  );
}

/** One run of one variant: a fresh queue with `messages` relay-shaped messages, drained by `pollers` loops. */
export async function measureConsumer(
  pool: pg.Pool,
  endpointUrl: string,
  shape: ConsumerShape,
  variant: ConsumerVariant,
): Promise<number> {
  await pool.query(`truncate ${SCHEMA}.effects, ${SCHEMA}.inbox, ${SCHEMA}.inbox_positions`);
  const sqs = relaySqsClient(endpointUrl, 10_000);
  try {
    const queueUrl = await createBenchQueue(sqs, "consumer");
    await seedQueue(sqs, queueUrl, shape);
    const handler = variant === "plain" ? plainHandler(pool) : inboxHandler(pool, variant);
    let processed = 0;
    const started = performance.now();
    // The clock stops at the last batch handled, not after the pollers' closing empty polls.
    let lastBatchDone = started;
    const poller = async () => {
      let idle = 0;
      // Stop after two empty long polls in a row: the other pollers hold the last in-flight groups.
      while (idle < 2) {
        const result = await pollOnce(sqs, queueUrl, handler, { waitSeconds: 0 });
        processed += result.received - result.failed;
        if (result.received > 0) lastBatchDone = performance.now();
        idle = result.received === 0 ? idle + 1 : 0;
        if (result.received === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    await Promise.all(Array.from({ length: shape.pollers }, poller));
    const seconds = (lastBatchDone - started) / 1000;
    const { rows } = await pool.query<{ n: number }>(`select count(*)::int as n from ${SCHEMA}.effects`);
    if (processed !== shape.messages || rows[0]?.n !== shape.messages) {
      throw new Error(
        `${variant}: processed ${processed}, effects ${rows[0]?.n}, expected ${shape.messages}`,
      );
    }
    return shape.messages / seconds;
  } finally {
    sqs.destroy();
  }
}

export function consumerMarkdown(result: ConsumerThroughput): string {
  const plain = result.variants.find((v) => v.variant === "plain")?.recordsPerSecond.median ?? Number.NaN;
  return markdownTable(
    ["handler", "records/s (median)", "min–max", "vs plain"],
    result.variants.map(({ variant, recordsPerSecond: r }) => [
      variant,
      r.median,
      `${Math.round(r.min)}–${Math.round(r.max)}`,
      `${(r.median / plain).toFixed(2)}x`,
    ]),
  );
}

export function summarizeConsumer(
  shape: ConsumerShape,
  runs: Map<ConsumerVariant, number[]>,
): ConsumerThroughput {
  return {
    shape,
    variants: CONSUMER_VARIANTS.map((variant) => ({
      variant,
      recordsPerSecond: repeated(runs.get(variant) ?? []),
    })),
  };
}

async function seedQueue(sqs: SQSClient, queueUrl: string, shape: ConsumerShape) {
  const createdAt = new Date();
  for (let start = 0; start < shape.messages; start += 10) {
    const entries = Array.from({ length: Math.min(10, shape.messages - start) }, (_, offset) => {
      const n = start + offset;
      const id = crypto.randomUUID();
      const aggregateId = `order-${n % shape.groups}`;
      const body = JSON.stringify({ orderId: aggregateId, amount: n });
      return {
        Id: String(offset),
        MessageBody: body,
        MessageGroupId: aggregateId,
        MessageDeduplicationId: id,
        MessageAttributes: messageAttributes({
          id,
          aggregateType: "order",
          aggregateId,
          eventType: "order.paid",
          createdAt,
          seq: String(n + 1),
          headers: {},
          body,
        }),
      };
    });
    await sqs.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }));
  }
}

function plainHandler(pool: pg.Pool): InboxLambdaHandler {
  return async (event: SqsEvent): Promise<SqsBatchResponse> => {
    for (const record of event.Records) {
      const payload = JSON.parse(record.body) as { orderId: string; amount: number };
      await pool.query(
        `insert into ${SCHEMA}.effects (outbox_id, aggregate_id, amount) values ($1, $2, $3)`,
        [record.messageAttributes.outboxId?.stringValue, payload.orderId, payload.amount],
      );
    }
    return { batchItemFailures: [] };
  };
}

function inboxHandler(pool: pg.Pool, variant: ConsumerVariant): InboxLambdaHandler {
  return createInboxHandler(
    async (event: InboxEvent<{ orderId: string; amount: number }>, { client }) => {
      await client.query(
        `insert into ${SCHEMA}.effects (outbox_id, aggregate_id, amount) values ($1, $2, $3)`,
        [event.id, event.payload.orderId, event.payload.amount],
      );
    },
    {
      pool,
      schema: SCHEMA,
      groupConcurrency: variant === "inbox, groupConcurrency 1" ? 1 : 4,
      staleEvents: variant === "inbox, groupConcurrency 4, staleEvents skip" ? "skip" : "apply",
    },
  );
}
