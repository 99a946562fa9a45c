import { createHash } from "node:crypto";
import { copyFile, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { defaultMigrationsDir, migrate } from "../../functions/shared/db/migrate.ts";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { purgeStatements } from "../../functions/shared/purge/sql/purgePublished.ts";
import { useEmptyDatabases, useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { asRole, outboxRoles, quoteRole, uniqueRoleName } from "../support/roles.ts";

const db = useTestDatabase();
const { emptyPool, cleanUpFirst } = useEmptyDatabases();
let orders: { relay: string; purge: string };
let billing: { relay: string; purge: string };

/** Issue 28, finding 7: a second outbox in the same database (the cluster's roles were shared by both). */
beforeAll(async () => {
  await migrate(db.pool, { schema: "billing" });
  orders = await outboxRoles(db.pool);
  billing = await outboxRoles(db.pool, "billing");
});

async function pendingEvent(schema = "public") {
  const [event] = await withTransaction(db.pool, (client) => enqueue(client, [anEvent()], { schema }));
  return event?.id as string;
}

async function row(id: string, schema = "public") {
  const { rows } = await db.pool.query(
    `select processed_at, last_error from ${quoteRole(schema)}.outbox_events where id = $1`,
    [id],
  );
  return rows[0];
}

describe("each outbox has its own relay and purge roles", () => {
  it("named after the database, schema and table, recorded beside the outbox, with no login", async () => {
    const { rows } = await db.pool.query<{ database: string }>("select current_database() as database");
    // Test databases are clones of the migrated template, given roles of their own by the migrations (0018):
    // 0009's name for this database (an md5 of it past 63 bytes) and a random suffix.
    const md5 = createHash("md5").update(`${rows[0]?.database}.public.outbox_events`).digest("hex");
    expect(orders.relay).toMatch(new RegExp(`^outbox_relay:${md5}:[0-9a-f]{8}$`));
    expect(orders.purge).toMatch(new RegExp(`^outbox_purge:${md5}:[0-9a-f]{8}$`));
    expect(billing).toEqual({
      relay: `outbox_relay:${rows[0]?.database}.billing.outbox_events`,
      purge: `outbox_purge:${rows[0]?.database}.billing.outbox_events`,
    });
    const { rows: roles } = await db.pool.query(
      "select rolname, rolcanlogin from pg_roles where rolname = any($1) order by 1",
      [[orders.relay, orders.purge, billing.relay, billing.purge]],
    );
    expect(roles.map((role) => role.rolcanlogin)).toEqual([false, false, false, false]);
  });

  it("keep one outbox's relay out of another's rows", async () => {
    const id = await pendingEvent("billing");

    await expect(
      asRole(db.pool, orders.relay, (client) => client.query("select payload from billing.outbox_events")),
    ).rejects.toThrow(/permission denied for (schema billing|table outbox_events)/);
    await expect(
      asRole(db.pool, orders.relay, (client) =>
        client.query("update billing.outbox_events set processed_at = now() where id = $1", [id]),
      ),
    ).rejects.toThrow(/permission denied/);

    expect(await row(id, "billing")).toEqual({ processed_at: null, last_error: null });
    // Its own outbox, it still reads and records.
    const own = await asRole(db.pool, billing.relay, (client) =>
      client.query("update billing.outbox_events set attempts = 1 where id = $1", [id]),
    );
    expect(own.rowCount).toBe(1);
  });

  it("keep one outbox's purge away from another's rows and marks", async () => {
    const id = await pendingEvent("billing");
    await db.pool.query(
      "update billing.outbox_events set processed_at = now() - interval '30 days' where id = $1",
      [id],
    );

    await expect(
      asRole(db.pool, orders.purge, (client) =>
        client.query("delete from billing.outbox_events where id = $1", [id]),
      ),
    ).rejects.toThrow(/permission denied/);
    await expect(
      asRole(db.pool, orders.purge, (client) =>
        client.query(
          `update ${quoteRole(outboxNames({ schema: "billing" }).privateSchema)}.outbox_group_high_water set purged_published_seq = 0`,
        ),
      ),
    ).rejects.toThrow(/permission denied/);

    expect(await row(id, "billing")).toMatchObject({ last_error: null });
  });

  it("leave the cluster-wide roles of 0008 nothing on either outbox", async () => {
    const { rows } = await db.pool.query(
      `select r.rolname, t.relname, n.nspname,
              has_table_privilege(r.oid, t.oid, 'SELECT, INSERT, UPDATE, DELETE') as privileged
       from pg_roles r, pg_class t join pg_namespace n on n.oid = t.relnamespace
       where r.rolname in ('outbox_relay', 'outbox_purge')
         and t.relname in ('outbox_events', 'outbox_group_high_water')
         and n.nspname in ('public', 'billing', 'outbox_private:public.outbox_events', 'outbox_private:billing.outbox_events')
         and has_table_privilege(r.oid, t.oid, 'SELECT, INSERT, UPDATE, DELETE')`,
    );
    expect(rows).toEqual([]);
  });
});

describe("the purge's role", () => {
  it("deletes no pending row, even by id, and writes no pending row's last_error", async () => {
    const id = await pendingEvent();

    const deleted = await asRole(db.pool, orders.purge, (client) =>
      client.query("delete from outbox_events where id = $1", [id]),
    );
    const updated = await asRole(db.pool, orders.purge, (client) =>
      client.query("update outbox_events set last_error = 'hidden' where id = $1", [id]),
    );

    expect({ deleted: deleted.rowCount, updated: updated.rowCount }).toEqual({ deleted: 0, updated: 0 });
    expect(await row(id)).toEqual({ processed_at: null, last_error: null });
  });

  it("deletes published and dead-lettered rows with the purge's own statements", async () => {
    const published = await pendingEvent();
    const dead = await pendingEvent();
    await db.pool.query(
      `update outbox_events set processed_at = case when id = $1 then now() - interval '2 days' end,
                                dead_lettered_at = case when id = $2 then now() - interval '2 days' end
       where id in ($1, $2)`,
      [published, dead],
    );
    const statements = purgeStatements(outboxNames());

    const counts = await asRole(db.pool, orders.purge, async (client) => ({
      published: (await client.query(statements.published, [new Date(Date.now() - 86_400_000), 1000])).rows[0]
        .deleted,
      dead: (await client.query(statements.deadLetters, [new Date(Date.now() - 86_400_000), 1000])).rowCount,
    }));

    expect(counts).toEqual({ published: 1, dead: 1 });
    const { rows } = await db.pool.query("select id from outbox_events where id in ($1, $2)", [
      published,
      dead,
    ]);
    expect(rows).toEqual([]);
  });

  it("cannot lower a group's high-water mark, move it to another group or delete it", async () => {
    const group = uniqueRoleName("group");
    const events = await withTransaction(db.pool, (client) =>
      enqueue(client, [anEvent({ aggregateId: group }), anEvent({ aggregateId: group })]),
    );
    const [first, second] = events.map((event) => String(event.seq));
    await db.pool.query(
      `insert into ${PRIVATE}.outbox_group_high_water (aggregate_id, purged_published_seq) values ($1, $2)`,
      [group, first],
    );
    const mark = async () =>
      (
        await db.pool.query(
          `select purged_published_seq from ${PRIVATE}.outbox_group_high_water where aggregate_id = $1`,
          [group],
        )
      ).rows[0]?.purged_published_seq;

    // Each lowering is refused (0016: no row of the group has that seq) or kept at the greater mark (0009).
    for (const statement of [
      `update ${PRIVATE}.outbox_group_high_water set purged_published_seq = 0 where aggregate_id = $1`,
      `insert into ${PRIVATE}.outbox_group_high_water as h (aggregate_id, purged_published_seq) values ($1, 1)
       on conflict (aggregate_id) do update set purged_published_seq = excluded.purged_published_seq`,
    ]) {
      await asRole(db.pool, orders.purge, (client) => client.query(statement, [group])).catch(() => {});
    }
    expect(await mark()).toBe(first);

    for (const statement of [
      `update ${PRIVATE}.outbox_group_high_water set aggregate_id = 'elsewhere' where aggregate_id = $1`,
      `delete from ${PRIVATE}.outbox_group_high_water where aggregate_id = $1`,
    ]) {
      await expect(
        asRole(db.pool, orders.purge, (client) => client.query(statement, [group])),
      ).rejects.toThrow(/permission denied for table outbox_group_high_water/);
    }
    // Raising it to the seq of a later row of the group, as the purge's own statement does, works.
    await asRole(db.pool, orders.purge, (client) =>
      client.query(
        `update ${PRIVATE}.outbox_group_high_water set purged_published_seq = $2 where aggregate_id = $1`,
        [group, second],
      ),
    );
    expect(await mark()).toBe(second);
  });
});

describe("upgrading from 0008 in place", () => {
  it("makes every login of the cluster-wide roles a member of the outbox's own, which alone holds the grants", async () => {
    const pool = await emptyPool();
    const dir = await mkdtemp(join(tmpdir(), "outbox-0008-"));
    cleanUpFirst(() => rm(dir, { recursive: true, force: true }));
    const files = (await readdir(defaultMigrationsDir())).filter((name) => /^000[1-8]_.*\.sql$/.test(name));
    for (const name of files) await copyFile(join(defaultMigrationsDir(), name), join(dir, name));
    await migrate(pool, { migrationsDir: dir });
    const relayLogin = uniqueRoleName("relay_login");
    const purgeLogin = uniqueRoleName("purge_login");
    await pool.query(`create role ${relayLogin} login in role outbox_relay`);
    await pool.query(`create role ${purgeLogin} login in role outbox_purge`);
    cleanUpFirst(async () => {
      await db.pool.query(`drop role if exists ${relayLogin}, ${purgeLogin}`);
    });
    // Plain SQL: this version's enqueue reads the limits table of 0012 (CHANGELOG), which a 0008 outbox lacks.
    const { rows: pending } = await pool.query(
      `insert into outbox_events (id, aggregate_type, aggregate_id, event_type, payload)
       values (gen_random_uuid(), 'order', 'order-1', 'order.created', '{}') returning id::text as id`,
    );

    const result = await migrate(pool);

    expect(result.applied).toEqual([
      "0009_no_back_doors.sql",
      "0010_order_key_highest_seq.sql",
      "0011_delete_on_publish.sql",
      "0012_payload_limit.sql",
      "0013_trace_context.sql",
      "0014_pending_dead_index.sql",
      "0015_destination_limits.sql",
      "0016_private_schema.sql",
      "0017_relay_handover.sql",
      "0018_roles_of_this_database.sql",
    ]);
    const roles = await outboxRoles(pool);
    const { rows } = await pool.query(
      `select pg_has_role($1, $3, 'member') as relay_member, pg_has_role($2, $4, 'member') as purge_member,
              has_table_privilege('outbox_relay', 'outbox_events', 'SELECT') as old_relay_reads,
              has_table_privilege('outbox_purge', 'outbox_events', 'DELETE') as old_purge_deletes`,
      [relayLogin, purgeLogin, roles.relay, roles.purge],
    );
    expect(rows).toEqual([
      { relay_member: true, purge_member: true, old_relay_reads: false, old_purge_deletes: false },
    ]);
    // The logins still do their jobs through their new roles.
    const read = await asRole(pool, relayLogin, (client) =>
      client.query("select id from outbox_events where processed_at is null"),
    );
    expect(read.rows).toEqual([{ id: pending[0]?.id }]);
    const state = await asRole(pool, relayLogin, (client) =>
      client.query(`select * from ${PRIVATE}.outbox_order_key_state()`),
    );
    expect(state.rows).toHaveLength(1);
  });
});
