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
