import { SendMessageCommand } from "@aws-sdk/client-sqs";
import { describe, expect, inject, it } from "vitest";
import { useTestDatabase } from "./support/db.ts";
import { createFifoQueue, receiveAll, sqsClient } from "./support/sqs.ts";

const db = useTestDatabase();

describe("test harness", () => {
  it("runs on Node 24, the Lambda runtime's major", () => {
    expect(process.versions.node.split(".")[0]).toBe("24");
  });

  it("gives each file a migrated database of its own", async () => {
    const { rows } = await db.pool.query<{ name: string; version: string }>(
      "select current_database() as name, current_setting('server_version_num') as version",
    );
    expect(rows[0]?.name).toMatch(/^outbox_test_/);
    expect(Number(rows[0]?.version)).toBeGreaterThanOrEqual(170000);
    const { rows: tables } = await db.pool.query("select to_regclass('public.outbox_events') as t");
    expect(tables[0]?.t).toBe("outbox_events");
  });

  it(`sends and receives through a real SQS FIFO endpoint (${inject("awsSource")})`, async () => {
    const sqs = sqsClient();
    const queueUrl = await createFifoQueue(sqs);
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: '{"hello":"fifo"}',
        MessageGroupId: "order-1",
        MessageDeduplicationId: "dedup-1",
      }),
    );
    const [message] = await receiveAll(sqs, queueUrl, 1);
    expect(message?.Body).toBe('{"hello":"fifo"}');
    expect(message?.Attributes?.MessageGroupId).toBe("order-1");
  });
});
