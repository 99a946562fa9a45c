import { SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type pg from "pg";
import { compactJsonbText } from "../../functions/shared/outbox/jsonbText.ts";
import { messageAttributes } from "../../functions/shared/outbox/message.ts";

interface OutboxRow {
  id: string;
  seq: string;
  aggregate_type: string;
  aggregate_id: string;
  event_type: string;
  payload: string;
  headers: Record<string, string>;
  created_at: Date;
}

/**
 * (4) The seed's algorithm, as the "Go article" writes it, for comparison: one transaction claims a batch with
 * FOR UPDATE SKIP LOCKED, then for each row sends one SendMessage and runs one UPDATE, inside the claim
 * transaction, and commits. Sequential by construction: every row costs an SQS round trip plus a database
 * round trip while the batch's locks are held. The messages are the relay's (same body, group id, dedup id
 * and attributes), so only the algorithm differs. It has no failure handling worth the name (an error rolls
 * the batch back): that is the article's, and irrelevant to a no-fault throughput run.
 */
export async function goArticleRelay(pool: pg.Pool, sqs: SQSClient, queueUrl: string, batchSize: number) {
  let published = 0;
  for (;;) {
    const client = await pool.connect();
    try {
      await client.query("begin");
      const { rows } = await client.query<OutboxRow>(
        `select id, seq, aggregate_type, aggregate_id, event_type, payload::text as payload, headers, created_at
         from outbox_events
         where processed_at is null
         order by seq
         limit $1
         for update skip locked`,
        [batchSize],
      );
      for (const row of rows) {
        const body = compactJsonbText(row.payload);
        await sqs.send(
          new SendMessageCommand({
            QueueUrl: queueUrl,
            MessageBody: body,
            MessageGroupId: row.aggregate_id,
            MessageDeduplicationId: row.id,
            MessageAttributes: messageAttributes({
              id: row.id,
              aggregateType: row.aggregate_type,
              aggregateId: row.aggregate_id,
              eventType: row.event_type,
              headers: row.headers,
              createdAt: row.created_at,
              seq: row.seq,
              body,
            }),
          }),
        );
        await client.query("update outbox_events set processed_at = now() where id = $1", [row.id]);
      }
      await client.query("commit");
      client.release();
      published += rows.length;
      if (rows.length === 0) return published;
    } catch (error) {
      await client.query("rollback").catch(() => {});
      client.release();
      throw error;
    }
  }
}
