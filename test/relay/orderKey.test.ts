import type { ScheduledEvent } from "aws-lambda";
import { afterEach, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { lambdaContext, relayLambdaEnv } from "../support/lambda.ts";
import { highestPublishedSeq } from "../support/outboxRows.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { drain, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, sqsClient } from "../support/sqs.ts";

/**
 * Issue 21, finding 5: the order key must never run backwards unnoticed: a sequence restarted or setval'd lower
 * (a restore into a fresh sequence, a Blue/Green switchover), CACHE > 1, or inserts under
 * session_replication_role = replica that skipped the commit-order trigger.
 */
const db = useTestDatabase();
const sqs = sqsClient();
const SEQUENCE = "outbox_events_seq_seq";
const scheduledEvent = {} as ScheduledEvent;
let queueUrl: string;

beforeAll(async () => {
  queueUrl = await createFifoQueue(sqs, "order-key");
  Object.assign(
    process.env,
    relayLambdaEnv({
      DATABASE_URL: db.url,
      OUTBOX_QUEUE_URL: queueUrl,
      AWS_ENDPOINT_URL: inject("awsEndpoint"),
      POWERTOOLS_LOG_LEVEL: "ERROR",
    }),
  );
});
afterEach(async () => {
  await db.pool.query(`alter sequence ${SEQUENCE} cache 1`);
});

async function handler() {
  vi.resetModules();
  return (await import("../../functions/relay/handler.ts")).handler;
}

async function pending(): Promise<number> {
  const { rows } = await db.pool.query(
    "select count(*)::int as n from outbox_events where processed_at is null and dead_lettered_at is null",
  );
  return rows[0].n;
}

describe("the order key never runs backwards unnoticed", () => {
  it("a sequence set below a published seq (restore, setval) stops the relay, naming the fix", async () => {
    await enqueueCommitted(db.pool, [anEvent(), anEvent()]);
    await drain(db.pool, sqs, testRelayOptions(queueUrl));
    await db.pool.query(`select setval('${SEQUENCE}', 1)`);
    await enqueueCommitted(db.pool, anEvent());

    const invocation = (await handler())(scheduledEvent, lambdaContext(2_500));

    await expect(invocation).rejects.toMatchObject({ name: "OrderKeyError" });
    await expect(invocation).rejects.toThrow(
      /order key ran backwards: sequence .* would hand out seq \d+ next, not above seq \d+.*setval/,
    );
    expect(await pending()).toBe(1);
    await db.pool.query(`select setval('${SEQUENCE}', $1)`, [await highestPublishedSeq(db.pool)]);
    await expect((await handler())(scheduledEvent, lambdaContext(2_500))).resolves.toMatchObject({
      published: 1,
    });
  });

  it("a sequence with CACHE > 1 is refused", async () => {
    await db.pool.query(`alter sequence ${SEQUENCE} cache 20`);
    await enqueueCommitted(db.pool, anEvent());

    const invocation = (await handler())(scheduledEvent, lambdaContext(2_500));

    await expect(invocation).rejects.toThrow(/CACHE 20.*cache 1/);
    expect(await pending()).toBe(1);
  });

  it("a CYCLE sequence is refused: past its maximum a group's next event would take the smallest seq", async () => {
    await db.pool.query(`alter sequence ${SEQUENCE} cycle`);
    try {
      await enqueueCommitted(db.pool, anEvent());
      const waiting = await pending();

      const invocation = (await handler())(scheduledEvent, lambdaContext(2_500));

      await expect(invocation).rejects.toMatchObject({ name: "OrderKeyError" });
      await expect(invocation).rejects.toThrow(/has CYCLE.*alter sequence \S*outbox_events_seq_seq no cycle/);
      expect(await pending()).toBe(waiting);
    } finally {
      await db.pool.query(`alter sequence ${SEQUENCE} no cycle`);
    }
  });

  it("a sequence at its maximum is refused, naming it, where last_value + 1 was taken for the next seq", async () => {
    const { rows } = await db.pool.query(`select last_value::text from ${SEQUENCE}`);
    await db.pool.query(`alter sequence ${SEQUENCE} maxvalue ${rows[0].last_value}`);
    try {
      const invocation = (await handler())(scheduledEvent, lambdaContext(2_500));

      await expect(invocation).rejects.toThrow(
        new RegExp(`at its maximum ${rows[0].last_value}.*maxvalue 9223372036854775807`),
      );
    } finally {
      await db.pool.query(`alter sequence ${SEQUENCE} no maxvalue`);
    }
  });

  it("inserts under session_replication_role = replica keep their seq and raise the sequence past it (0016)", async () => {
    const { rows: before } = await db.pool.query(`select last_value::text from ${SEQUENCE}`);
    const origin = BigInt(before[0].last_value) + 1000n;
    const client = await db.pool.connect();
    try {
      await client.query("set session_replication_role = replica");
      const { rows } = await client.query(
        `insert into outbox_events (seq, aggregate_type, aggregate_id, event_type, payload)
         overriding system value values ($1, 'order', 'replicated-1', 'e', '{}') returning seq, text_bytes_bound`,
        [origin],
      );
      expect(BigInt(rows[0].seq)).toBe(origin);
      expect(rows[0].text_bytes_bound).not.toBeNull();
    } finally {
      await client.query("reset session_replication_role");
      client.release();
    }
    const [later] = await enqueueCommitted(db.pool, [anEvent()]);
    expect(later?.seq).toBeGreaterThan(origin);
  });
});
