import { beforeAll, describe, expect, it } from "vitest";
import { inboxNames } from "../../functions/shared/consumer/inboxTable.ts";
import { createInboxHandler, type InboxRecordHandler } from "../../functions/shared/consumer/index.ts";
import { parseInboxEvent } from "../../functions/shared/consumer/parseInboxEvent.ts";
import { recordInbox } from "../../functions/shared/consumer/sql/recordInbox.ts";
import { guardClient, TransactionControlError } from "../../functions/shared/consumer/transactionGuard.ts";
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
    // Issue 39, finding 2: Postgres drops an empty statement, so each of these is one COMMIT or ROLLBACK.
    ["a commit after an empty statement", [";commit"]],
    ["a rollback after an empty statement", [";rollback"]],
    ["an end after empty statements, whitespace and comments", [" ;\n; /* c */ ; -- c\n end"]],
    ["an abort after an empty statement", [";abort"]],
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

  it("sends nothing more once the server reports the transaction ended, whatever ended it (issue 39, finding 2)", async () => {
    // The guard's last line: a path that ends the transaction without the guard seeing it (here the session
    // itself, as an unforeseen statement would). Each statement after it would autocommit on its own.
    const session = await db.pool.connect();
    const id = relayRecord({ aggregateId: "ended", seq: 1 }).messageAttributes.outboxId?.stringValue ?? "";
    try {
      await session.query("begin");
      const guard = guardClient(session);
      await session.query("commit");
      // Two at once: the second is not sent behind the first either.
      const answers = await Promise.allSettled([
        guard.client.query(insertEffect, [id, "ended", "first"]),
        guard.client.query(insertEffect, [id, "ended", "second"]),
      ]);

      expect(answers.map((answer) => answer.status)).toEqual(["rejected", "rejected"]);
      expect(guard.refused()).toBeInstanceOf(TransactionControlError);
      expect(String(guard.refused())).toMatch(/the record's transaction ended/);
    } finally {
      await session.query("rollback").catch(() => {});
      session.release();
    }
    expect(await rowsOf(id)).toEqual({ inbox: 0, effects: [] });
  });

  it("refuses COPY before sending it: FROM STDIN would wait past the statement timeout (issue 39, finding 7)", async () => {
    const log = recorder();
    let answer: unknown;
    const started = Date.now();
    const handler = createInboxHandler(
      async (_event, { client }) => {
        answer = await client
          .query(`copy ${CONSUMER_SCHEMA}.effects from stdin`)
          .catch((error: unknown) => error);
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA, statementTimeoutMs: 1_000, ...log },
    );
    const record = relayRecord({ aggregateId: "copy-from-stdin", seq: 1 });

    const result = await handler({ Records: [record] });

    expect(answer).toBeInstanceOf(TransactionControlError);
    expect(String(answer)).toMatch(/"copy" on context.client: COPY FROM STDIN/);
    expect(result.batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
    expect(Date.now() - started).toBeLessThan(1_000);
  });
});

describe("the server refuses a commit of a record's transaction that is not the pipeline's (issue 39, finding 2)", () => {
  it("rolls back the inbox row and the writes when the transaction is committed by anything else", async () => {
    // What a COMMIT that got past the guard would do: the record's insert, a write, then a bare COMMIT.
    const event = parseInboxEvent(relayRecord({ aggregateId: "bare-commit", seq: 1 }));
    const session = await db.pool.connect();
    let answer: unknown;
    try {
      await session.query("begin");
      await recordInbox(session, inboxNames({ schema: CONSUMER_SCHEMA }), "default", event);
      await session.query(insertEffect, [event.id, event.aggregateId, "written"]);
      answer = await session.query("commit").catch((error: unknown) => error);
    } finally {
      await session.query("rollback").catch(() => {});
      session.release();
    }

    expect(String(answer)).toMatch(/an inbox row commits only with its record's commit/);
    expect(await rowsOf(event.id)).toEqual({ inbox: 0, effects: [] });
  });

  it("refuses `set constraints all immediate`, which would run that check before the commit", async () => {
    let answer: unknown;
    const handler = createInboxHandler(
      async (_event, { client }) => {
        answer = await client.query("SET CONSTRAINTS ALL IMMEDIATE").catch((error: unknown) => error);
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA },
    );

    await handler({ Records: [relayRecord({ aggregateId: "constraints-immediate", seq: 1 })] });

    expect(String(answer)).toMatch(/TransactionControlError: "SET CONSTRAINTS ALL IMMEDIATE"/);
  });
});
