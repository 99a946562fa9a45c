import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createInboxHandler, type InboxRecordHandler } from "../../functions/shared/consumer/index.ts";
import { CONSUMER_SCHEMA, createConsumerTables, recorder, relayRecord } from "../support/consumer.ts";
import { useTestDatabase } from "../support/db.ts";

/**
 * Issue 28, finding 5: a session-level setting a handler changes must not reach the next record on the same
 * session (nor, behind pgbouncer, another client): one session (max: 1), so the next record gets it.
 */
const db = useTestDatabase();
let pool: pg.Pool;

beforeAll(async () => {
  await createConsumerTables(db.pool);
  pool = new pg.Pool({ connectionString: db.url, max: 1 });
  pool.on("error", () => {});
});
afterAll(async () => {
  await pool?.end();
});

const insertEffect = `insert into ${CONSUMER_SCHEMA}.effects (outbox_id, aggregate_id, event_type) values ($1, $2, $3)`;

describe("a handler's session settings never reach the next record (issue 28, finding 5)", () => {
  const poisons: [string, string][] = [
    ["a SET statement", "set default_transaction_read_only = on"],
    ["set_config(…, false) in a select", "select set_config('default_transaction_read_only', 'on', false)"],
    ["a SET in a DO block", "do $$ begin set default_transaction_read_only = on; end $$"],
  ];
  for (const [name, poison] of poisons) {
    it(`runs the next record read write after ${name}`, async () => {
      const log = recorder();
      const handler = createInboxHandler(
        async (event, { client }) => {
          await client.query(insertEffect, [event.id, event.aggregateId, event.eventType]);
          if (event.eventType === "poison") await client.query(poison).catch(() => {});
        },
        { pool, schema: CONSUMER_SCHEMA, ...log },
      );
      const first = relayRecord({ aggregateId: `poison-${name}`, seq: 1, eventType: "poison" });
      const next = relayRecord({ aggregateId: `poison-${name}-next`, seq: 2 });

      await handler({ Records: [first] });
      const result = await handler({ Records: [next] });

      expect(result.batchItemFailures).toEqual([]);
      expect(log.statuses()[next.messageId]).toBe("processed");
      const { rows } = await pool.query<{ value: string }>(
        "select current_setting('default_transaction_read_only') as value",
      );
      expect(rows[0]?.value).toBe("off");
    });
  }

  it("refuses a session-level SET, RESET or SET SESSION by name, and still allows SET LOCAL", async () => {
    const answers: Record<string, string> = {};
    const statements = [
      "set search_path = elsewhere",
      "SET SESSION statement_timeout = 0",
      "/* a comment */ reset search_path",
      "set local search_path = elsewhere",
    ];
    const handler = createInboxHandler(
      async (_event, { client }) => {
        for (const statement of statements) {
          answers[statement] = await client.query(statement).then(
            () => "ran",
            (error: unknown) => String(error),
          );
          if (answers[statement] !== "ran") await client.query("select 1").catch(() => {});
        }
      },
      { pool, schema: CONSUMER_SCHEMA },
    );

    await handler({ Records: [relayRecord({ aggregateId: "session-set", seq: 1 })] });

    expect(answers["set search_path = elsewhere"]).toMatch(/TransactionControlError: "set search_path"/);
    expect(answers["SET SESSION statement_timeout = 0"]).toMatch(/"SET SESSION statement_timeout"/);
    expect(answers["/* a comment */ reset search_path"]).toMatch(/"reset search_path"/);
    expect(answers["set local search_path = elsewhere"]).toBe("ran");
  });

  it("leaves no custom setting, role or search path behind for the next record", async () => {
    const seen: Record<string, string | null>[] = [];
    const handler: InboxRecordHandler = async (event, { client }) => {
      const { rows } = await client.query<Record<string, string | null>>(
        // Unset, a custom setting reads null; reset, ''; neither is the tenant.
        `select coalesce(current_setting('app.tenant', true), '') as tenant, current_user::text as who,
                current_setting('search_path') as path`,
      );
      seen.push(rows[0] as Record<string, string | null>);
      if (event.eventType === "poison") {
        await client.query(
          "select set_config('app.tenant', 'tenant-1', false), set_config('search_path', 'elsewhere', false), set_config('role', 'pg_monitor', false)",
        );
      }
    };
    const consume = createInboxHandler(handler, { pool, schema: CONSUMER_SCHEMA });

    await consume({ Records: [relayRecord({ aggregateId: "leak", seq: 1, eventType: "poison" })] });
    await consume({ Records: [relayRecord({ aggregateId: "leak-next", seq: 2 })] });

    expect(seen[1]).toEqual(seen[0]);
  });
});

/**
 * Issue 39, finding 7: what a handler leaves on its session beyond settings (temp tables, session advisory locks,
 * LISTEN, prepared statements, WITH HOLD cursors) is discarded when its record's transaction ends, commit or
 * rollback, in the same round trip: behind pgbouncer too, where the next transaction on that backend may be
 * another client's.
 */
describe("session state a handler creates never reaches the next record (issue 39, finding 7)", () => {
  it("drops a handler's temp table before the next record, which then writes the real table", async () => {
    const handler = createInboxHandler(
      async (event, { client }) => {
        if (event.eventType === "poison") {
          // Through a function, which the guard cannot read: named like the real table, it would shadow it.
          await client.query(
            `do $$ begin execute 'create temp table effects (like ${CONSUMER_SCHEMA}.effects including all)'; end $$`,
          );
          return;
        }
        await client.query(`set local search_path = ${CONSUMER_SCHEMA}`);
        await client.query("insert into effects (outbox_id, aggregate_id, event_type) values ($1, $2, $3)", [
          event.id,
          event.aggregateId,
          event.eventType,
        ]);
      },
      { pool, schema: CONSUMER_SCHEMA },
    );
    const next = relayRecord({ aggregateId: "temp-next", seq: 2 });
    const nextId = next.messageAttributes.outboxId?.stringValue ?? "";

    await handler({ Records: [relayRecord({ aggregateId: "temp", seq: 1, eventType: "poison" })] });
    const result = await handler({ Records: [next] });

    expect(result.batchItemFailures).toEqual([]);
    const written = await db.pool.query(`select 1 from ${CONSUMER_SCHEMA}.effects where outbox_id = $1`, [
      nextId,
    ]);
    expect(written.rowCount).toBe(1);
    // Not on any backend: the catalog is the database's, whichever backend pgbouncer lent.
    const temp = await db.pool.query(
      "select 1 from pg_class where relname = 'effects' and relpersistence = 't'",
    );
    expect(temp.rowCount).toBe(0);
  });

  for (const outcome of ["commits", "fails"] as const) {
    it(`releases a session advisory lock the handler took when its record ${outcome}`, async () => {
      const key = outcome === "commits" ? 39_007_001 : 39_007_002;
      const handler = createInboxHandler(
        async (_event, { client }) => {
          await client.query("select pg_advisory_lock($1)", [key]);
          if (outcome === "fails") throw new Error("the handler fails after taking the lock");
        },
        { pool, schema: CONSUMER_SCHEMA },
      );

      await handler({ Records: [relayRecord({ aggregateId: `lock-${outcome}`, seq: 1 })] });

      // Seen from the server's lock table: held by no backend, whichever one pgbouncer lent.
      const { rows } = await db.pool.query<{ n: number }>(
        "select count(*)::int as n from pg_locks where locktype = 'advisory' and objid = $1",
        [key],
      );
      expect(rows[0]?.n).toBe(0);
    });
  }

  it("leaves no LISTEN, prepared statement or WITH HOLD cursor on the session", async () => {
    // One direct session: these live in one backend, so the next record must be on the same one to see them.
    const direct = new pg.Pool({ connectionString: db.directUrl, max: 1 });
    try {
      const answers: string[] = [];
      const handler = createInboxHandler(
        async (_event, { client }) => {
          await client.query(
            "do $$ begin execute 'listen handler_channel'; execute 'prepare handler_statement as select 1'; end $$",
          );
          await client.query("declare handler_cursor cursor with hold for select 1");
          for (const statement of ["listen handler_channel", "prepare handler_statement as select 1"]) {
            answers.push(await client.query(statement).then(() => "ran", String));
          }
        },
        { pool: direct, schema: CONSUMER_SCHEMA },
      );

      await handler({ Records: [relayRecord({ aggregateId: "session-objects", seq: 1 })] });

      expect(answers[0]).toMatch(/TransactionControlError: "listen"/);
      expect(answers[1]).toMatch(/TransactionControlError: "prepare"/);
      const { rows } = await direct.query<{ channels: number; statements: number; cursors: number }>(
        `select (select count(*)::int from pg_listening_channels()) as channels,
                (select count(*)::int from pg_prepared_statements where from_sql) as statements,
                (select count(*)::int from pg_cursors) as cursors`,
      );
      expect(rows[0]).toEqual({ channels: 0, statements: 0, cursors: 0 });
    } finally {
      await direct.end();
    }
  });
});
