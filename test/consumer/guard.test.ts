import { beforeAll, describe, expect, it } from "vitest";
import { createInboxHandler, type InboxRecordHandler } from "../../functions/shared/consumer/index.ts";
import { CONSUMER_SCHEMA, createConsumerTables, recorder, relayRecord } from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";

/**
 * Issue 28, finding 4: the guard decided by tokenizing the handler's SQL, and these texts got past it. Each
 * must now leave the inbox row and the handler's writes in one transaction: either both commit (processed) or
 * neither does (failed, redelivered), and a redelivery is never a "duplicate" of a half-applied record.
 */
const db = useTestDatabase();

beforeAll(async () => {
  await createConsumerTables(db.pool);
});

const insertEffect = `insert into ${CONSUMER_SCHEMA}.effects (outbox_id, aggregate_id, event_type) values ($1, $2, $3)`;

async function rowsOf(id: string): Promise<{ inbox: number; effects: string[] }> {
  const inbox = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from ${CONSUMER_SCHEMA}.inbox where outbox_id = $1`,
    [id],
  );
  const written = await db.pool.query<{ event_type: string }>(
    `select event_type from ${CONSUMER_SCHEMA}.effects where outbox_id = $1 order by applied_at`,
    [id],
  );
  return { inbox: inbox.rows[0]?.n ?? 0, effects: written.rows.map((row) => row.event_type) };
}

/**
 * A handler that writes "before", sends `smuggled` (swallowing whatever it answers, the worst case), writes
 * "after", and fails its first attempt after that (a transient error), so the record is redelivered once.
 */
function smuggling(smuggled: string[]): InboxRecordHandler {
  let attempts = 0;
  return async (event, { client }) => {
    attempts++;
    await client.query(insertEffect, [event.id, event.aggregateId, "before"]);
    for (const text of smuggled) await client.query(text).catch(() => {});
    await client.query(insertEffect, [event.id, event.aggregateId, "after"]).catch(() => {});
    if (attempts === 1) throw new Error("transient failure after the smuggled statement");
  };
}

describe("the guard cannot be talked around (issue 28, finding 4)", () => {
  const smuggled: [string, string[]][] = [
    // `name'\'` is a typed literal (standard strings: the backslash is a character), not an E'' string.
    ["a typed literal taken for an E'' string", ["select name'\\'; rollback; select name'x'"]],
    [
      "a commit after a non-ASCII identifier ending in a dollar-quote-like tag",
      ["select 1 as é$x$; commit; select 'a$x$'"],
    ],
    [
      "a commit after a backslash-escaped quote",
      ["set local standard_conforming_strings = off", "select 'a\\''; commit; select '1'"],
    ],
    [
      "a rollback after a backslash-escaped quote",
      ["set local standard_conforming_strings = off", "select 'a\\''; rollback; select '1'"],
    ],
    ["a commit in a DO block (Postgres refuses it in a transaction block)", ["do $$ begin commit; end $$"]],
  ];
  for (const [name, texts] of smuggled) {
    it(`keeps the inbox row and the effects together: ${name}`, async () => {
      const log = recorder();
      const handler = createInboxHandler(smuggling(texts), {
        pool: db.pool,
        schema: CONSUMER_SCHEMA,
        ...log,
      });
      const record = relayRecord({ aggregateId: `smuggle-${name}`, seq: 1 });
      const id = record.messageAttributes.outboxId?.stringValue ?? "";

      await handler({ Records: [record] });
      await handler({ Records: [record] });

      const statuses = log.outcomes.map((outcome) => outcome.status);
      const rows = await rowsOf(id);
      // Never a duplicate of a half-applied record: the first attempt failed, so it committed nothing.
      expect(statuses[0]).toBe("failed");
      expect(statuses[1]).not.toBe("duplicate");
      // The inbox row commits exactly with the handler's writes, once.
      if (statuses[1] === "processed") {
        expect(rows).toEqual({ inbox: 1, effects: ["before", "after"] });
      } else {
        expect(rows).toEqual({ inbox: 0, effects: [] });
      }
    });
  }

  it("refuses a multi-statement text (the server does: each query is one prepared statement)", async () => {
    const log = recorder();
    let answer: unknown;
    const handler = createInboxHandler(
      async (event, { client }) => {
        await client.query(insertEffect, [event.id, event.aggregateId, "before"]);
        answer = await client.query("select 1; commit").catch((error: unknown) => error);
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA, ...log },
    );
    const record = relayRecord({ aggregateId: "multi-statement", seq: 1 });
    const id = record.messageAttributes.outboxId?.stringValue ?? "";

    const result = await handler({ Records: [record] });

    expect(String(answer)).toMatch(/cannot insert multiple commands into a prepared statement/);
    expect(result.batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
    expect(await rowsOf(id)).toEqual({ inbox: 0, effects: [] });
  });

  it("refuses a query form it cannot force into one statement (a submittable), naming it", async () => {
    const log = recorder();
    let answer: unknown;
    const handler = createInboxHandler(
      async (_event, { client }) => {
        const submittable = { submit: () => {}, text: "commit" };
        try {
          answer = await (client.query as (query: unknown) => Promise<unknown>)(submittable);
        } catch (error) {
          answer = error;
        }
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA, ...log },
    );
    const record = relayRecord({ aggregateId: "submittable", seq: 1 });

    const result = await handler({ Records: [record] });

    expect(String(answer)).toMatch(/TransactionControlError: .*submittable/i);
    expect(result.batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
  });
});
