import pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import {
  createInboxHandler,
  type InboxRecordHandler,
  InboxUnavailableError,
  type SessionClient,
} from "../../functions/shared/consumer/index.ts";
import {
  CONSUMER_SCHEMA,
  createConsumerTables,
  effects,
  inboxIds,
  lambdaContextWithRemaining,
  recorder,
  relayRecord,
} from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";
import { startStallingTcpProxy } from "../support/tcpProxy.ts";

const db = useTestDatabase();

beforeAll(async () => {
  await createConsumerTables(db.pool);
  await db.pool.query(`create table ${CONSUMER_SCHEMA}.unique_things (key text primary key)`);
});

const insertEffect = `insert into ${CONSUMER_SCHEMA}.effects (outbox_id, aggregate_id, event_type) values ($1, $2, $3)`;

const writeEffect: InboxRecordHandler = async (event, { client }) => {
  await client.query(insertEffect, [event.id, event.aggregateId, event.eventType]);
};

async function inboxRows(id: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from ${CONSUMER_SCHEMA}.inbox where outbox_id = $1`,
    [id],
  );
  return rows[0]?.n ?? 0;
}

/** A session lent by the user's own code, as `withClient` does it. */
const withClient = async <T>(work: (client: SessionClient) => Promise<T>) => {
  const client = await db.pool.connect();
  try {
    return await work(client);
  } finally {
    client.release();
  }
};

describe("no acknowledgement without the effect (finding 1): COMMIT answered with ROLLBACK", () => {
  for (const lend of ["pool", "withClient"] as const) {
    it(`fails a record whose handler caught its own SQL error (${lend}): nothing kept, redelivered, logged`, async () => {
      const log = recorder();
      const source = lend === "pool" ? { pool: db.pool } : { withClient };
      const handler = createInboxHandler(
        async (event, { client }) => {
          await client.query(insertEffect, [event.id, event.aggregateId, event.eventType]);
          await client.query(`insert into ${CONSUMER_SCHEMA}.unique_things values ('taken-${lend}')`);
          try {
            await client.query(`insert into ${CONSUMER_SCHEMA}.unique_things values ('taken-${lend}')`);
          } catch {
            // "already there, fine": ordinary handler code, which leaves the transaction aborted.
          }
        },
        { ...source, schema: CONSUMER_SCHEMA, ...log },
      );
      const record = relayRecord({ aggregateId: `caught-${lend}`, seq: 1 });
      const id = record.messageAttributes.outboxId?.stringValue ?? "";

      const result = await handler({ Records: [record] });

      expect(result.batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
      expect(await inboxRows(id)).toBe(0);
      expect(await effects(db.pool)).not.toContain(id);
      expect(log.statuses()).toEqual({ [record.messageId]: "failed" });
      expect(log.logs.find((line) => line.level === "error")?.fields.error).toMatch(
        /TransactionRolledBackError: COMMIT was answered with ROLLBACK/,
      );
    });
  }
});

describe("the user's code cannot escape the record's transaction (finding 2)", () => {
  it("refuses a commit on context.client, naming it, and keeps nothing of the record", async () => {
    const log = recorder();
    const handler = createInboxHandler(
      async (event, { client }) => {
        await client.query(insertEffect, [event.id, event.aggregateId, "first"]);
        await client.query("commit");
        await client.query(insertEffect, [event.id, event.aggregateId, "second"]);
        throw new Error("the rest failed");
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA, ...log },
    );
    const record = relayRecord({ aggregateId: "escape-commit", seq: 1 });
    const id = record.messageAttributes.outboxId?.stringValue ?? "";

    const first = await handler({ Records: [record] });
    const again = await handler({ Records: [record] });

    expect(first.batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
    expect(again.batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
    // Not classed "duplicate" on redelivery: nothing of the first attempt was committed.
    expect(log.outcomes.map((outcome) => outcome.status)).toEqual(["failed", "failed"]);
    expect(await inboxRows(id)).toBe(0);
    expect(await effects(db.pool)).not.toContain(id);
    expect(log.logs.find((line) => line.level === "error")?.fields.error).toMatch(
      /"commit" on context\.client: transaction control is refused/,
    );
  });

  // A text of several statements ("select 1; commit") is refused by the server itself: test/consumer/guard.test.ts.
  const refused = [
    ["begin", "begin"],
    ["BEGIN ISOLATION LEVEL SERIALIZABLE", "BEGIN"],
    ["start transaction", "start transaction"],
    ["  -- a comment\n  /* and /* a nested */ one */ COMMIT", "COMMIT"],
    ["end", "end"],
    ["rollback", "rollback"],
    ["Abort", "Abort"],
    ["set transaction isolation level serializable", "set transaction"],
    ["set session characteristics as transaction read only", "set session characteristics"],
    ["prepare transaction 'p1'", "prepare transaction"],
    ["commit prepared 'p1'", "commit"],
  ] as const;
  for (const [statement, named] of refused) {
    it(`refuses ${JSON.stringify(statement)} before it reaches the database`, async () => {
      const log = recorder();
      let reached = false;
      const handler = createInboxHandler(
        async (event, { client }) => {
          await client.query(insertEffect, [event.id, event.aggregateId, event.eventType]);
          try {
            await client.query(statement);
          } catch (error) {
            // Even a handler that swallows the refusal does not get its record acknowledged.
            expect(String(error)).toContain(`"${named}"`);
            reached = true;
          }
        },
        { pool: db.pool, schema: CONSUMER_SCHEMA, ...log },
      );
      const record = relayRecord({ aggregateId: "escape-many", seq: 1 });
      const id = record.messageAttributes.outboxId?.stringValue ?? "";

      const result = await handler({ Records: [record] });

      expect(reached).toBe(true);
      expect(result.batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
      expect(await inboxRows(id)).toBe(0);
    });
  }

  it("lets a handler use savepoints of its own: catching an expected error the safe way keeps the record", async () => {
    const log = recorder();
    const handler = createInboxHandler(
      async (event, { client }) => {
        await client.query(insertEffect, [event.id, event.aggregateId, event.eventType]);
        await client.query(`insert into ${CONSUMER_SCHEMA}.unique_things values ('savepoint-key')`);
        await client.query("savepoint maybe_taken");
        try {
          await client.query(`insert into ${CONSUMER_SCHEMA}.unique_things values ('savepoint-key')`);
          await client.query("release savepoint maybe_taken");
        } catch {
          await client.query("rollback to savepoint maybe_taken");
        }
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA, ...log },
    );
    const record = relayRecord({ aggregateId: "own-savepoint", seq: 1 });
    const id = record.messageAttributes.outboxId?.stringValue ?? "";

    const result = await handler({ Records: [record] });

    expect(result.batchItemFailures).toEqual([]);
    expect(log.statuses()).toEqual({ [record.messageId]: "processed" });
    expect(await inboxRows(id)).toBe(1);
    expect(await effects(db.pool)).toContain(id);
  });
});

describe("outages are loud (finding 3)", () => {
  it("throws InboxUnavailableError when the database stops answering (client-side query timeout)", async () => {
    const port = Number(new URL(db.url).port);
    const proxy = await startStallingTcpProxy(port);
    const url = new URL(db.url);
    url.host = `127.0.0.1:${proxy.port}`;
    const pool = new pg.Pool({ connectionString: url.toString(), max: 1, query_timeout: 300 });
    pool.on("error", () => {});
    try {
      // One idle session in the pool, then the path goes silent: the next query is never answered.
      (await pool.connect()).release();
      proxy.stall();
      const log = recorder();
      const handler = createInboxHandler(writeEffect, { pool, schema: CONSUMER_SCHEMA, ...log });
      const record = relayRecord({ aggregateId: "silent-db", seq: 1 });

      await expect(handler({ Records: [record] })).rejects.toThrow(InboxUnavailableError);
      expect(log.outcomes.map((outcome) => outcome.status)).toEqual(["failed"]);
    } finally {
      await pool.end().catch(() => {});
      await proxy.close();
    }
  });
});

describe("an inbox that was never migrated (issue 38)", () => {
  it("fails the invocation with InboxUnavailableError saying which migrations to run", async () => {
    const log = recorder();
    const handler = createInboxHandler(writeEffect, { pool: db.pool, schema: "never_migrated", ...log });
    const record = relayRecord({ aggregateId: "no-inbox", seq: 1 });

    const error = await handler({ Records: [record] }).catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(InboxUnavailableError);
    expect((error as Error).message).toContain(
      'NotMigratedError: the inbox "never_migrated"."inbox" is not migrated in this database: run ' +
        "`outbox migrate --schema never_migrated --inbox inbox` (or await migrateInbox(pool, " +
        '{ schema: "never_migrated", table: "inbox" })) first',
    );
    expect((error as Error).message).toMatch(/42P01: relation "never_migrated\.inbox" does not exist/);
    expect(log.outcomes.map((outcome) => outcome.status)).toEqual(["failed"]);
  });
});

describe("serialization failures and deadlocks are retried in process (finding 4)", () => {
  const raise = (code: string) => `do $$ begin raise exception 'injected' using errcode = '${code}'; end $$`;

  for (const code of ["40001", "40P01"]) {
    it(`retries a record whose transaction failed with ${code}, and applies it once`, async () => {
      const log = recorder();
      let attempts = 0;
      const handler = createInboxHandler(
        async (event, { client }) => {
          attempts++;
          await client.query(insertEffect, [event.id, event.aggregateId, event.eventType]);
          if (attempts === 1) await client.query(raise(code));
        },
        { pool: db.pool, schema: CONSUMER_SCHEMA, ...log },
      );
      const record = relayRecord({ aggregateId: `retry-${code}`, seq: 1 });
      const id = record.messageAttributes.outboxId?.stringValue ?? "";

      const result = await handler({ Records: [record] });

      expect(result.batchItemFailures).toEqual([]);
      expect(attempts).toBe(2);
      expect(log.statuses()).toEqual({ [record.messageId]: "processed" });
      expect((await effects(db.pool)).filter((effect) => effect === id)).toEqual([id]);
    });
  }

  it("gives up after a bounded number of attempts and fails the record (not the invocation)", async () => {
    const log = recorder();
    let attempts = 0;
    const handler = createInboxHandler(
      async (_event, { client }) => {
        attempts++;
        await client.query(raise("40001"));
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA, ...log },
    );
    const record = relayRecord({ aggregateId: "retry-forever", seq: 1 });

    const result = await handler({ Records: [record] });

    expect(result.batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
    expect(attempts).toBe(3);
  });

  it("runs each record read committed even when the session's default is repeatable read (withClient)", async () => {
    const seen: string[] = [];
    const lend = async <T>(work: (client: SessionClient) => Promise<T>) => {
      const client = await db.pool.connect();
      try {
        await client.query("set default_transaction_isolation = 'repeatable read'");
        return await work(client);
      } finally {
        await client.query("reset default_transaction_isolation");
        client.release();
      }
    };
    const handler = createInboxHandler(
      async (_event, { client }) => {
        const { rows } = await client.query("select current_setting('transaction_isolation') as level");
        seen.push(rows[0].level);
      },
      { withClient: lend, schema: CONSUMER_SCHEMA },
    );

    await handler({ Records: [relayRecord({ aggregateId: "isolation", seq: 1 })] });

    expect(seen).toEqual(["read committed"]);
  });
});

describe("callbacks never change an outcome (finding 5)", () => {
  it("keeps an applied record acknowledged when onOutcome throws, and logs the callback's error", async () => {
    const log = recorder();
    const handler = createInboxHandler(writeEffect, {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      logger: log.logger,
      onOutcome: () => {
        throw new Error("metrics backend down");
      },
    });
    const record = relayRecord({ aggregateId: "on-outcome-throws", seq: 1 });
    const id = record.messageAttributes.outboxId?.stringValue ?? "";

    const result = await handler({ Records: [record] });

    expect(result.batchItemFailures).toEqual([]);
    expect(await inboxIds(db.pool)).toContain(id);
    expect(log.logs).toContainEqual(
      expect.objectContaining({
        level: "error",
        fields: expect.objectContaining({ error: expect.stringMatching(/metrics backend down/) }),
      }),
    );
  });

  it("keeps outcomes when the logger itself throws", async () => {
    const throwing = () => {
      throw new Error("log sink closed");
    };
    const handler = createInboxHandler(
      async (event, context) => {
        await writeEffect(event, context);
        if (event.aggregateId === "logger-fails") throw new Error("handler failed");
      },
      {
        pool: db.pool,
        schema: CONSUMER_SCHEMA,
        logger: { info: throwing, warn: throwing, error: throwing },
      },
    );
    const ok = relayRecord({ aggregateId: "logger-ok", seq: 1 });
    const bad = relayRecord({ aggregateId: "logger-fails", seq: 1 });

    const result = await handler({ Records: [ok, bad, ok] });

    // The duplicate (third) is logged at info, the failure at error, the batch at warn: all throw.
    expect(result.batchItemFailures).toEqual([{ itemIdentifier: bad.messageId }]);
    expect(await inboxIds(db.pool)).toContain(ok.messageAttributes.outboxId?.stringValue);
  });
});

describe("deadline-aware (finding 8)", () => {
  it("starts no record once the remaining time cannot fit its statement timeout; those and their group's rest are failed unprocessed", async () => {
    const log = recorder();
    let remaining = 60_000;
    const started: string[] = [];
    const handler = createInboxHandler(
      async (event, context) => {
        started.push(event.aggregateId);
        await writeEffect(event, context);
        // The first record used up the invocation's time.
        remaining = 1_500;
      },
      { pool: db.pool, schema: CONSUMER_SCHEMA, statementTimeoutMs: 2_000, groupConcurrency: 1, ...log },
    );
    const a1 = relayRecord({ aggregateId: "deadline-a", seq: 1 });
    const b1 = relayRecord({ aggregateId: "deadline-b", seq: 2 });
    const b2 = relayRecord({ aggregateId: "deadline-b", seq: 3 });

    const result = await handler(
      { Records: [a1, b1, b2] },
      lambdaContextWithRemaining(() => remaining),
    );

    expect(started).toEqual(["deadline-a"]);
    expect(result.batchItemFailures).toEqual([
      { itemIdentifier: b1.messageId },
      { itemIdentifier: b2.messageId },
    ]);
    expect(log.outcomes).toEqual([
      expect.objectContaining({ status: "processed", messageId: a1.messageId }),
      expect.objectContaining({ status: "skipped", messageId: b1.messageId, reason: "deadline" }),
      expect.objectContaining({ status: "skipped", messageId: b2.messageId, reason: "group" }),
    ]);
  });

  it("fails the invocation, naming both numbers, when not even the first record fits", async () => {
    const handler = createInboxHandler(writeEffect, {
      pool: db.pool,
      schema: CONSUMER_SCHEMA,
      statementTimeoutMs: 30_000,
    });
    const record = relayRecord({ aggregateId: "deadline-never", seq: 1 });

    await expect(
      handler(
        { Records: [record] },
        lambdaContextWithRemaining(() => 29_900),
      ),
    ).rejects.toThrow(/29900 ms left.*statementTimeoutMs 30000/);
  });
});
