import { randomUUID } from "node:crypto";
import { cp, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import {
  createInboxHandler,
  type InboxRecordHandler,
  migrateInbox,
  type SqsRecord,
} from "../../functions/shared/consumer/index.ts";
import { defaultMigrationsDir } from "../../functions/shared/db/migrate.ts";
import { CONSUMER_SCHEMA, createConsumerTables, recorder, relayRecord } from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";

/**
 * Issue 28, finding 6: `seq` is one outbox's sequence, so a high-water mark compares only the seqs of the outbox
 * that assigned them. Two producers on one bus both have `order/42`: neither's events are stale to the other's.
 */
const db = useTestDatabase();

beforeAll(async () => {
  await createConsumerTables(db.pool);
});

const writeEffect: InboxRecordHandler = async (event, { client }) => {
  await client.query(
    `insert into ${CONSUMER_SCHEMA}.effects (outbox_id, aggregate_id, event_type) values ($1, $2, $3)`,
    [event.id, event.aggregateId, `seq:${event.seq}`],
  );
};

let nextMessage = 0;

/** An EventBridge event from the relay whose `source` is `source`, as an SQS target of a rule receives it. */
function busRecord(source: string, aggregateId: string, seq: number): SqsRecord {
  const messageId = `bus-${++nextMessage}`;
  const detail = {
    outboxId: randomUUID(),
    aggregateType: "order",
    aggregateId,
    eventType: "order.placed",
    seq: String(seq),
    createdAt: new Date().toISOString(),
    headers: {},
    payload: { seq },
  };
  const body = JSON.stringify({
    version: "0",
    id: randomUUID(),
    "detail-type": "order.placed",
    source,
    account: "123456789012",
    time: new Date().toISOString(),
    region: "eu-west-1",
    resources: [],
    detail,
  });
  return {
    messageId,
    receiptHandle: messageId,
    body,
    attributes: { ApproximateReceiveCount: "1", SentTimestamp: String(Date.now()) },
    messageAttributes: {},
    eventSource: "aws:sqs",
    eventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:billing-events",
    awsRegion: "eu-west-1",
  };
}

async function applied(aggregateId: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ event_type: string }>(
    `select event_type from ${CONSUMER_SCHEMA}.effects where aggregate_id = $1 order by applied_at`,
    [aggregateId],
  );
  return rows.map((row) => row.event_type);
}

describe("stale-skip positions are kept per origin (issue 28, finding 6)", () => {
  it("applies two producers' events of one aggregate on one bus: each source has its own mark", async () => {
    const log = recorder();
    const handler = createInboxHandler(writeEffect, {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      staleEvents: "skip",
      ...log,
    });

    await handler({ Records: [busRecord("com.example.orders", "42", 900)] });
    await handler({ Records: [busRecord("com.example.returns", "42", 5)] });
    await handler({ Records: [busRecord("com.example.returns", "42", 6)] });
    // Still stale within one source.
    await handler({ Records: [busRecord("com.example.orders", "42", 800)] });

    expect(log.outcomes.map((outcome) => outcome.status)).toEqual([
      "processed",
      "processed",
      "processed",
      "stale",
    ]);
    expect(await applied("42")).toEqual(["seq:900", "seq:5", "seq:6"]);
  });

  it("keeps the relay's SQS messages of two queues apart (the queue is the origin)", async () => {
    const log = recorder();
    const handler = createInboxHandler(writeEffect, {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      staleEvents: "skip",
      ...log,
    });
    const fromQueue = (queue: string, seq: number): SqsRecord => ({
      ...relayRecord({ aggregateId: "43", seq }),
      eventSourceARN: `arn:aws:sqs:eu-west-1:123456789012:${queue}.fifo`,
    });

    await handler({ Records: [fromQueue("orders", 900)] });
    await handler({ Records: [fromQueue("returns", 5)] });
    await handler({ Records: [fromQueue("orders", 899)] });

    expect(log.outcomes.map((outcome) => outcome.status)).toEqual(["processed", "processed", "stale"]);
    expect(await applied("43")).toEqual(["seq:900", "seq:5"]);
  });

  it("migrates existing positions in place: they keep their seq under the default origin ''", async () => {
    const schema = "consumer_positions_upgrade";
    const upTo0003 = await mkdtemp(join(tmpdir(), "inbox-0003-"));
    try {
      for (const file of ["0001_inbox.sql", "0002_consumer_key.sql", "0003_consumer_positions.sql"]) {
        await cp(join(defaultMigrationsDir(), "inbox", file), join(upTo0003, file));
      }
      await migrateInbox(db.pool, { schema, migrationsDir: upTo0003 });
    } finally {
      await rm(upTo0003, { recursive: true, force: true });
    }
    await db.pool.query(
      `insert into ${schema}.inbox_positions (consumer, aggregate_type, aggregate_id, seq) values ('default', 'order', '44', 70)`,
    );

    const upgraded = await migrateInbox(db.pool, { schema });
    const { rows } = await db.pool.query(
      `select consumer, origin, aggregate_type, aggregate_id, seq::text from ${schema}.inbox_positions`,
    );
    const key = await db.pool.query<{ key: string }>(
      `select pg_get_constraintdef(oid) as key from pg_constraint
       where conrelid = '${schema}.inbox_positions'::regclass and contype = 'p'`,
    );

    expect(upgraded.applied).toEqual(["0004_position_origin.sql", "0005_commits_with_record.sql"]);
    expect(rows).toEqual([
      { consumer: "default", origin: "", aggregate_type: "order", aggregate_id: "44", seq: "70" },
    ]);
    expect(key.rows[0]?.key).toBe("PRIMARY KEY (consumer, origin, aggregate_type, aggregate_id)");
  });
});
