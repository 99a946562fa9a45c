import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { readOutboxSnapshot } from "../../functions/shared/observe/snapshot.ts";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { DEFAULT_PURGE_OPTIONS, runPurge } from "../../functions/shared/purge/purge.ts";
import { noProgressError } from "../../functions/shared/relay/invocation.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { drain, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

const db = useTestDatabase();
const aws = useFakeSqs();
const pools: pg.Pool[] = [];

afterAll(async () => {
  for (const pool of pools) await pool.end();
});

/** A login in `role` (migrations/0008_roles.sql), and a pool connected as it to this file's database. */
async function loginIn(role: "outbox_relay" | "outbox_purge"): Promise<pg.Pool> {
  const user = `${role}_login_${process.pid}_${pools.length}`;
  await db.pool.query(`create role ${user} login password 'login-password' in role ${role}`);
  const url = new URL(db.url);
  url.username = user;
  url.password = "login-password";
  const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
  pools.push(pool);
  return pool;
}

async function privileges(role: string) {
  const { rows } = await db.pool.query<{ privilege: string }>(
    `select privilege_type as privilege from information_schema.role_table_grants
      where grantee = $1 and table_name = 'outbox_events'
     union all
     select privilege_type || ' (' || column_name || ')' from information_schema.column_privileges
      where grantee = $1 and table_name = 'outbox_events'
        and not exists (select from information_schema.role_table_grants t
                        where t.grantee = $1 and t.table_name = 'outbox_events'
                          and t.privilege_type = column_privileges.privilege_type)
     order by 1`,
    [role],
  );
  return rows.map((row) => row.privilege);
}

describe("the outbox_relay and outbox_purge roles", () => {
  it("hold exactly what the relay's and the purge's statements need", async () => {
    expect(await privileges("outbox_relay")).toEqual([
      "SELECT",
      "UPDATE (attempts)",
      "UPDATE (available_at)",
      "UPDATE (dead_lettered_at)",
      "UPDATE (last_error)",
      "UPDATE (processed_at)",
      "UPDATE (transient_failures)",
    ]);
    expect(await privileges("outbox_purge")).toEqual(["DELETE", "SELECT", "UPDATE (last_error)"]);
    const { rows } = await db.pool.query(
      "select rolname, rolcanlogin from pg_roles where rolname in ('outbox_relay', 'outbox_purge') order by 1",
    );
    expect(rows).toEqual([
      { rolname: "outbox_purge", rolcanlogin: false },
      { rolname: "outbox_relay", rolcanlogin: false },
    ]);
  });

  it("let a relay login claim, publish and record, and a purge login measure and delete", async () => {
    const queueUrl = await createFifoQueue(aws.sqs, `roles-${Date.now()}`);
    await withTransaction(db.pool, (client) =>
      enqueue(client, [anEvent({ aggregateId: "order-1" }), anEvent({ aggregateId: "order-2" })]),
    );
    const relayPool = await loginIn("outbox_relay");

    const summary = await drain(relayPool, aws.sqs, testRelayOptions(queueUrl));

    expect(summary).toMatchObject({ published: 2, failedRounds: 0 });
    const purgePool = await loginIn("outbox_purge");
    const options = { ...DEFAULT_PURGE_OPTIONS, statementTimeoutMs: 2_000, retentionHours: 1 };
    expect(await readOutboxSnapshot(purgePool, options)).toMatchObject({ pending: 0 });
    await db.pool.query("update outbox_events set processed_at = now() - interval '2 hours'");
    const purged = await runPurge({ pool: purgePool, deadline: Date.now() + 60_000 }, options);
    expect(purged).toMatchObject({ deletedRows: 2, stoppedBy: "drained" });
  });

  it("make a missing grant fail the relay loudly, naming the table, and lose nothing", async () => {
    const queueUrl = await createFifoQueue(aws.sqs, `roles-missing-${Date.now()}`);
    const [event] = await withTransaction(db.pool, (client) => enqueue(client, [anEvent()]));
    const relayPool = await loginIn("outbox_relay");
    await db.pool.query("revoke update (dead_lettered_at) on outbox_events from outbox_relay");
    try {
      const summary = await drain(relayPool, aws.sqs, testRelayOptions(queueUrl));

      expect(summary).toMatchObject({ published: 0, stoppedBy: "errors" });
      expect(summary.lastError).toMatch(/permission denied for table outbox_events/);
      // The invocation fails (RelayErrors pages), and the event is still pending for the next one.
      expect(noProgressError(summary)?.message).toMatch(/permission denied/);
      const { rows } = await db.pool.query(
        "select processed_at, dead_lettered_at from outbox_events where id = $1",
        [event?.id],
      );
      expect(rows).toEqual([{ processed_at: null, dead_lettered_at: null }]);
    } finally {
      await db.pool.query("grant update (dead_lettered_at) on outbox_events to outbox_relay");
    }
  });

  it("make a missing grant stop the purge with the database's error", async () => {
    const purgePool = await loginIn("outbox_purge");
    await db.pool.query("revoke delete on outbox_events from outbox_purge");
    try {
      await db.pool.query(
        `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, processed_at)
         values ('order', 'old', 'order.created', '{}', now() - interval '2 hours')`,
      );
      const options = { ...DEFAULT_PURGE_OPTIONS, statementTimeoutMs: 2_000, retentionHours: 1 };
      const purged = await runPurge({ pool: purgePool, deadline: Date.now() + 60_000 }, options);

      expect(purged).toMatchObject({ stoppedBy: "error", deletedRows: 0 });
      expect(purged.error).toMatch(/permission denied for table outbox_events/);
    } finally {
      await db.pool.query("grant delete on outbox_events to outbox_purge");
    }
  });
});
