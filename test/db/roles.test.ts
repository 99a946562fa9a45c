import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { readOutboxSnapshot } from "../../functions/shared/observe/snapshot.ts";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { DEFAULT_PURGE_OPTIONS, runPurge } from "../../functions/shared/purge/purge.ts";
import { noProgressError } from "../../functions/shared/relay/invocation.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { drain, testRelayOptions } from "../support/relay.ts";
import { outboxRoles, quoteRole } from "../support/roles.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

const db = useTestDatabase();
const aws = useFakeSqs();
const pools: pg.Pool[] = [];

afterAll(async () => {
  for (const pool of pools) await pool.end();
});

/**
 * A login in the outbox's role for `job` (migrations/0008_roles.sql, per outbox since 0009_no_back_doors.sql), and
 * a pool connected as it to this file's database.
 */
async function loginIn(job: "relay" | "purge"): Promise<pg.Pool> {
  const user = `outbox_${job}_login_${process.pid}_${pools.length}`;
  const role = (await outboxRoles(db.pool))[job];
  await db.pool.query(`create role ${user} login password 'login-password' in role ${quoteRole(role)}`);
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

describe("the outbox's relay and purge roles", () => {
  it("hold exactly what the relay's and the purge's statements need", async () => {
    const roles = await outboxRoles(db.pool);
    expect(await privileges(roles.relay)).toEqual([
      "DELETE",
      "SELECT",
      "UPDATE (attempts)",
      "UPDATE (available_at)",
      "UPDATE (dead_lettered_at)",
      "UPDATE (last_error)",
      "UPDATE (processed_at)",
      "UPDATE (transient_failures)",
    ]);
    expect(await privileges(roles.purge)).toEqual(["DELETE", "SELECT", "UPDATE (last_error)"]);
    const { rows } = await db.pool.query(
      `select has_sequence_privilege($1, 'outbox_events_seq_seq', 'SELECT') as relay_reads_sequence,
              has_sequence_privilege($1, 'outbox_events_seq_seq', 'USAGE, UPDATE') as relay_draws_sequence,
              has_table_privilege($2, '${PRIVATE}.outbox_group_high_water', 'SELECT, INSERT') as purge_marks,
              has_table_privilege($2, '${PRIVATE}.outbox_group_high_water', 'UPDATE, DELETE') as purge_rewrites_marks,
              has_column_privilege($2, '${PRIVATE}.outbox_group_high_water', 'purged_published_seq', 'UPDATE') as purge_raises,
              (select array_agg(rolcanlogin) from pg_roles where rolname in ($1, $2)) as can_login`,
      [roles.relay, roles.purge],
    );
    expect(rows).toEqual([
      {
        relay_reads_sequence: true,
        relay_draws_sequence: false,
        purge_marks: true,
        purge_rewrites_marks: false,
        purge_raises: true,
        can_login: [false, false],
      },
    ]);
  });

  it.each(["keep", "delete"] as const)(
    "let a relay login claim, publish and record (retention %s), and a purge login measure and delete",
    async (retention) => {
      const queueUrl = await createFifoQueue(aws.sqs, `roles-${retention}-${Date.now()}`);
      await withTransaction(db.pool, (client) =>
        enqueue(client, [anEvent({ aggregateId: "order-1" }), anEvent({ aggregateId: "order-2" })]),
      );
      const relayPool = await loginIn("relay");

      const summary = await drain(relayPool, aws.sqs, testRelayOptions(queueUrl, { retention }));

      expect(summary).toMatchObject({ published: 2, failedRounds: 0 });
      const purgePool = await loginIn("purge");
      const options = { ...DEFAULT_PURGE_OPTIONS, statementTimeoutMs: 2_000, retentionHours: 1 };
      expect(await readOutboxSnapshot(purgePool, options)).toMatchObject({ pending: 0 });
      await db.pool.query("update outbox_events set processed_at = now() - interval '2 hours'");
      const purged = await runPurge({ pool: purgePool, deadline: Date.now() + 60_000 }, options);
      // keep: the two marked rows; delete: the relay deleted them already, and left the dead letters alone.
      expect(purged).toMatchObject({ deletedRows: retention === "keep" ? 2 : 0, stoppedBy: "drained" });
    },
  );

  it("let the relay's role delete pending rows only: never a dead letter or a published row (0011's policy)", async () => {
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, dead_lettered_at, processed_at)
       values ('order', 'kept-dead', 'e', '{}', now(), null), ('order', 'kept-published', 'e', '{}', null, now())`,
    );
    const relayPool = await loginIn("relay");

    const deleted = await relayPool.query(
      "delete from outbox_events where aggregate_id in ('kept-dead', 'kept-published')",
    );

    expect(deleted.rowCount).toBe(0);
    const { rows } = await db.pool.query(
      "select aggregate_id from outbox_events where aggregate_id like 'kept-%' order by 1",
    );
    expect(rows).toEqual([{ aggregate_id: "kept-dead" }, { aggregate_id: "kept-published" }]);
  });

  it("make a missing grant fail the relay loudly, naming the table, and lose nothing", async () => {
    const queueUrl = await createFifoQueue(aws.sqs, `roles-missing-${Date.now()}`);
    const [event] = await withTransaction(db.pool, (client) => enqueue(client, [anEvent()]));
    const relayPool = await loginIn("relay");
    const { relay } = await outboxRoles(db.pool);
    await db.pool.query(`revoke update (dead_lettered_at) on outbox_events from ${quoteRole(relay)}`);
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
      await db.pool.query(`grant update (dead_lettered_at) on outbox_events to ${quoteRole(relay)}`);
    }
  });

  it("make a missing grant stop the purge with the database's error", async () => {
    const purgePool = await loginIn("purge");
    const { purge } = await outboxRoles(db.pool);
    await db.pool.query(`revoke delete on outbox_events from ${quoteRole(purge)}`);
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
      await db.pool.query(`grant delete on outbox_events to ${quoteRole(purge)}`);
    }
  });
});
