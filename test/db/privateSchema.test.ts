import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrate } from "../../functions/shared/db/migrate.ts";
import { outboxNames, PRIVATE_OBJECTS } from "../../functions/shared/outbox/names.ts";
import { useTestDatabase } from "../support/db.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { asRole, outboxRoles, uniqueRoleName } from "../support/roles.ts";

/**
 * Issue 39, finding 1. On PG 15+ the database owner owns `public` (pg_database_owner); an application role that
 * owns its database, or the schema passed to --schema, may drop any object in that schema, whoever owns it, and
 * create its own under the name. The SECURITY DEFINER commit-order trigger called outbox_group_lock_key(text)
 * and outbox_text_bound(jsonb) and read outbox_limits by name in that schema: the producer's next insert ran
 * the producer's code as the migration owner. Migration 0016 moved them to a schema of the outbox's own.
 */
const db = useTestDatabase();
const app = uniqueRoleName("app");
const names = outboxNames();
const MIB = 1_048_576;

beforeAll(async () => {
  await db.pool.query(`create role ${app} nologin`);
  // As on PG 15+ when the application owns its database: `public` belongs to pg_database_owner. Set outright,
  // so PG 14 (where public belongs to the bootstrap superuser) is tested the same way.
  await db.pool.query(`alter schema public owner to ${app}`);
  await db.pool.query(`grant insert on public.outbox_events to ${app}`);
});

afterAll(async () => {
  await db.pool.query("alter schema public owner to current_user");
  await db.pool.query(`drop owned by ${app} cascade`);
  await db.pool.query(`drop role ${app}`);
});

/** One statement as the schema-owning producer; what Postgres answered, so every step of the attack is tried. */
async function tryAs(statement: string): Promise<string> {
  try {
    await asRole(db.pool, app, (client) => client.query(statement));
    return "done";
  } catch (error) {
    return (error as Error).message;
  }
}

const escalate = `language plpgsql as $$ begin execute format('alter role %I superuser', '${app}'); return 1; end $$`;

async function insertAsApp(payloadBytes: number) {
  return tryAs(
    `insert into public.outbox_events (aggregate_type, aggregate_id, event_type, payload)
     values ('order', 'order-1', 'e', jsonb_build_object('blob', repeat('x', ${payloadBytes})))`,
  );
}

describe("definer code calls only what its owner owns (0016)", () => {
  it("a producer that owns the outbox's schema cannot replace what the trigger calls, nor become superuser", async () => {
    const attempts = [];
    for (const schema of ["public", PRIVATE]) {
      attempts.push(
        await tryAs(`drop function ${schema}.outbox_group_lock_key(text)`),
        await tryAs(`create function ${schema}.outbox_group_lock_key(text) returns bigint ${escalate}`),
        await tryAs(`drop function ${schema}.outbox_text_bound(jsonb)`),
        await tryAs(`create function ${schema}.outbox_text_bound(jsonb) returns bigint ${escalate}`),
        await tryAs(`drop table ${schema}.outbox_limits`),
        await tryAs(
          `create table ${schema}.outbox_limits (one_row boolean primary key default true,
             max_payload_bytes integer not null default 2147483647);
           insert into ${schema}.outbox_limits default values`,
        ),
      );
    }
    attempts.push(await tryAs(`alter schema ${PRIVATE} owner to ${app}`));

    const small = await insertAsApp(100);
    const large = await insertAsApp(2 * MIB);

    const { rows } = await db.pool.query("select rolsuper from pg_roles where rolname = $1", [app]);
    expect(rows).toEqual([{ rolsuper: false }]);
    expect(small).toBe("done");
    expect(large).toMatch(/outbox payload: its JSON text is \d+ bytes, over 1572864/);
    // Nothing of the private schema could be touched.
    expect(attempts.slice(6, 12)).toEqual(
      Array(6).fill(expect.stringMatching(/permission denied|must be owner/)),
    );
    expect(attempts.at(-1)).toMatch(/must be owner/);
  });

  it("everything the trigger and the relay call or read lives in the private schema, which only its owner may change", async () => {
    const { rows: misplaced } = await db.pool.query(
      `select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where n.nspname = 'public' and c.relname = any($1::text[]) and c.relowner <> $2::regrole
       union all
       select p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname = 'public' and p.proname = any($1::text[]) and p.proowner <> $2::regrole`,
      [[...PRIVATE_OBJECTS].map((suffix) => names.relatedName(suffix)), app],
    );
    expect(misplaced).toEqual([]); // (the first test's producer may have left its own there)

    const { rows } = await db.pool.query(
      `select pg_get_userbyid(n.nspowner) = current_user as owned_by_migrator,
              (select array_agg(r.rolname order by r.rolname) from pg_roles r
               where has_schema_privilege(r.oid, n.oid, 'CREATE') and not r.rolsuper) as others_may_create,
              (select count(*)::int from pg_class c where c.relnamespace = n.oid
               and c.relowner <> n.nspowner) as objects_owned_by_others,
              (select count(*)::int from pg_proc p where p.pronamespace = n.oid
               and p.proowner <> n.nspowner) as functions_owned_by_others
       from pg_namespace n where n.nspname = $1`,
      [names.privateSchema],
    );
    expect(rows).toEqual([
      {
        owned_by_migrator: true,
        others_may_create: null,
        objects_owned_by_others: 0,
        functions_owned_by_others: 0,
      },
    ]);
  });

  it("the relay and the purge find their state there through the names every code path uses", async () => {
    const roles = await outboxRoles(db.pool);
    const state = await asRole(db.pool, roles.relay, (client) =>
      client.query(`select * from ${names.related("order_key_state")}()`),
    );
    expect(state.rows).toHaveLength(1);
    expect(names.related("limits")).toBe(`${PRIVATE}."outbox_limits"`);
  });

  it("refuses to adopt a schema someone else created under the private schema's name", async () => {
    const other = outboxNames({ schema: "public", table: "squatted_events" });
    await db.pool.query(`create schema "${other.privateSchema}" authorization ${app}`);
    const pool = new pg.Pool({ connectionString: db.directUrl, max: 2 });
    try {
      await expect(migrate(pool, { table: "squatted_events" })).rejects.toThrow(
        /0016_private_schema\.sql.*already exists|already exists/s,
      );
    } finally {
      await pool.end();
      await db.pool.query(`drop schema "${other.privateSchema}" cascade`);
    }
  });
});
