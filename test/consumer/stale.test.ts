import { cp, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import {
  createInboxHandler,
  type InboxRecordHandler,
  migrateInbox,
  purgeInbox,
} from "../../functions/shared/consumer/index.ts";
import { defaultMigrationsDir } from "../../functions/shared/db/migrate.ts";
import { CONSUMER_SCHEMA, createConsumerTables, recorder, relayRecord } from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";

const db = useTestDatabase();

beforeAll(async () => {
  await createConsumerTables(db.pool);
});

/** Writes the effect with the event's seq, so a test can read what was applied, in commit order. */
const writeEffect: InboxRecordHandler = async (event, { client }) => {
  await client.query(
    `insert into ${CONSUMER_SCHEMA}.effects (outbox_id, aggregate_id, event_type) values ($1, $2, $3)`,
    [event.id, event.aggregateId, `seq:${event.seq}`],
  );
};

async function appliedSeqs(aggregateId: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ event_type: string }>(
    `select event_type from ${CONSUMER_SCHEMA}.effects where aggregate_id = $1 order by applied_at`,
    [aggregateId],
  );
  return rows.map((row) => row.event_type);
}

describe("consumers sharing one database (finding 9)", () => {
  it("keys the deduplication by consumer name: two consumers each apply the same event once", async () => {
    const record = relayRecord({ aggregateId: "shared-db", seq: 1 });
    const billing = createInboxHandler(writeEffect, {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      consumer: "billing",
    });
    const shipping = createInboxHandler(writeEffect, {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      consumer: "shipping",
    });

    await billing({ Records: [record] });
    await shipping({ Records: [record] });
    await billing({ Records: [record] });

    expect(await appliedSeqs("shared-db")).toEqual(["seq:1", "seq:1"]);
  });

  it("keeps deduplicating the rows of an inbox created before consumer names existed (default name)", async () => {
    const schema = "consumer_upgrade";
    const firstOnly = await mkdtemp(join(tmpdir(), "inbox-0001-"));
    try {
      await cp(join(defaultMigrationsDir(), "inbox", "0001_inbox.sql"), join(firstOnly, "0001_inbox.sql"));
      await migrateInbox(db.pool, { schema, migrationsDir: firstOnly });
    } finally {
      await rm(firstOnly, { recursive: true, force: true });
    }
    const record = relayRecord({ aggregateId: "upgrade", seq: 1 });
    const id = record.messageAttributes.outboxId?.stringValue;
    // What the previous version wrote for an event it applied.
    await db.pool.query(
      `insert into ${schema}.inbox (outbox_id, event_type, aggregate_type, aggregate_id) values ($1, 'order.placed', 'order', 'upgrade')`,
      [id],
    );

    const upgraded = await migrateInbox(db.pool, { schema });
    const log = recorder();
    const handler = createInboxHandler(writeEffect, { pool: db.pool, schema, ...log });
    await handler({ Records: [record] });

    expect(upgraded.applied).toEqual([
      "0002_consumer_key.sql",
      "0003_consumer_positions.sql",
      "0004_position_origin.sql",
      "0005_commits_with_record.sql",
    ]);
    expect(log.statuses()).toEqual({ [record.messageId]: "duplicate" });
  });
});

describe("the consumer-key migration", () => {
  it("re-keys a table whose primary key name the placeholders would not spell (a name ending in _events)", async () => {
    await migrateInbox(db.pool, { schema: "odd_names", table: "inbox_events" });
    const log = recorder();
    const handler = createInboxHandler(() => {}, {
      pool: db.pool,
      schema: "odd_names",
      table: "inbox_events",
      staleEvents: "skip",
      ...log,
    });
    const record = relayRecord({ aggregateId: "odd", seq: 1 });

    await handler({ Records: [record] });
    await handler({ Records: [record] });

    expect(log.outcomes.map((outcome) => outcome.status)).toEqual(["processed", "duplicate"]);
  });
});

describe('staleEvents: "skip" (finding 9)', () => {
  it("acknowledges an older event of an aggregate after a newer one without running the handler", async () => {
    const log = recorder();
    const handler = createInboxHandler(writeEffect, {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      staleEvents: "skip",
      ...log,
    });
    const newer = relayRecord({ aggregateId: "stale-a", seq: 50 });
    const older = relayRecord({ aggregateId: "stale-a", seq: 30 });
    const latest = relayRecord({ aggregateId: "stale-a", seq: 70 });
    const otherAggregate = relayRecord({ aggregateId: "stale-b", seq: 10 });

    const first = await handler({ Records: [newer] });
    // A redrive brings the older one back after the newer one was applied.
    const second = await handler({ Records: [older, otherAggregate] });
    const third = await handler({ Records: [latest] });

    expect([first, second, third].map((result) => result.batchItemFailures)).toEqual([[], [], []]);
    expect(await appliedSeqs("stale-a")).toEqual(["seq:50", "seq:70"]);
    expect(await appliedSeqs("stale-b")).toEqual(["seq:10"]);
    expect(log.statuses()).toEqual({
      [newer.messageId]: "processed",
      [older.messageId]: "stale",
      [otherAggregate.messageId]: "processed",
      [latest.messageId]: "processed",
    });
    expect(log.logs).toContainEqual(
      expect.objectContaining({ level: "info", message: expect.stringMatching(/^stale event skipped/) }),
    );
  });

  it("keeps the high-water mark through purgeInbox: a late old event is still stale, the purged newest one too", async () => {
    const log = recorder();
    const handler = createInboxHandler(writeEffect, {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      staleEvents: "skip",
      ...log,
    });
    const applied = relayRecord({ aggregateId: "stale-purge", seq: 500 });
    await handler({ Records: [applied] });
    await db.pool.query(
      `update ${CONSUMER_SCHEMA}.inbox set processed_at = now() - interval '50 days' where aggregate_id = 'stale-purge'`,
    );
    const purged = await purgeInbox(db.pool, { schema: CONSUMER_SCHEMA });
    const late = relayRecord({ aggregateId: "stale-purge", seq: 400 });

    await handler({ Records: [late] });
    await handler({ Records: [applied] });

    expect(purged.deletedRows).toBeGreaterThanOrEqual(1);
    expect(await appliedSeqs("stale-purge")).toEqual(["seq:500"]);
    expect(log.outcomes.map((outcome) => outcome.status)).toEqual(["processed", "stale", "stale"]);
  });

  it("keeps one mark per consumer: what billing applied does not make an event stale for shipping", async () => {
    const options = { pool: db.pool, schema: CONSUMER_SCHEMA, staleEvents: "skip" } as const;
    const billing = createInboxHandler(writeEffect, { ...options, consumer: "billing-marks" });
    const shipping = recorder();
    const shippingHandler = createInboxHandler(writeEffect, {
      ...options,
      consumer: "shipping-marks",
      ...shipping,
    });

    await billing({ Records: [relayRecord({ aggregateId: "marks", seq: 9 })] });
    await shippingHandler({ Records: [relayRecord({ aggregateId: "marks", seq: 5 })] });

    expect(shipping.outcomes.map((outcome) => outcome.status)).toEqual(["processed"]);
  });

  it("never applies an event after a newer one of its aggregate when both run at once (standard queue, no groups)", async () => {
    const handler = createInboxHandler(writeEffect, {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      staleEvents: "skip",
      groupConcurrency: 10,
    });
    const records = [9, 3, 7, 1, 8, 2, 6, 4, 5, 10].map((seq) =>
      relayRecord({ aggregateId: "stale-race", seq, groupId: `standard-${seq}` }),
    );
    for (const record of records) delete record.attributes.MessageGroupId;

    const result = await handler({ Records: records });

    expect(result.batchItemFailures).toEqual([]);
    const seqs = (await appliedSeqs("stale-race")).map((effect) => Number(effect.slice(4)));
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(seqs.at(-1)).toBe(10);
  });

  it('applies every event with the default "apply", older ones included', async () => {
    const handler = createInboxHandler(writeEffect, { pool: db.pool, schema: CONSUMER_SCHEMA });
    await handler({ Records: [relayRecord({ aggregateId: "apply-all", seq: 5 })] });
    await handler({ Records: [relayRecord({ aggregateId: "apply-all", seq: 3 })] });
    expect(await appliedSeqs("apply-all")).toEqual(["seq:5", "seq:3"]);
  });

  it("refuses a bad staleEvents or consumer option, naming it", () => {
    expect(() => createInboxHandler(writeEffect, { pool: db.pool, staleEvents: "drop" as never })).toThrow(
      /staleEvents must be one of "apply", "skip", got "drop"/,
    );
    expect(() => createInboxHandler(writeEffect, { pool: db.pool, consumer: "" })).toThrow(
      /consumer must be a string of 1 to 100 characters/,
    );
  });
});
