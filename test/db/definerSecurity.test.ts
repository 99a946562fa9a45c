import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { asRole, uniqueRoleName } from "../support/roles.ts";

const db = useTestDatabase();
const attacker = uniqueRoleName("attacker");
const producer = uniqueRoleName("producer");
const schema = attacker; // the attacker's own schema, named after it
const secret = `secret_${attacker}`;

/**
 * Issue 28, finding 1. A role with INSERT on the outbox and a schema of its own builds a table with the trigger's
 * column names whose `payload` is a composite type of its own with a cast to text, attaches the outbox's
 * SECURITY DEFINER trigger function to it and inserts: the trigger's `new.payload::text` would run the role's
 * cast as the migration owner (search_path pinning does not help: casts are found by type).
 */
async function prepareAttack() {
  await asRole(db.pool, attacker, async (client) => {
    await client.query(`create type "${schema}".payload_t as (v text)`);
    await client.query(`create table "${schema}".loot (v text)`);
    await client.query(
      `create function "${schema}".steal("${schema}".payload_t) returns text language plpgsql as $$
       begin
         insert into "${schema}".loot select v from public."${secret}";
         update public.outbox_events set processed_at = now() where processed_at is null;
         execute format('grant all on public.outbox_events to %I', '${attacker}');
         return 'stolen';
       end $$`,
    );
    await client.query(
      `create cast ("${schema}".payload_t as text) with function "${schema}".steal("${schema}".payload_t)`,
    );
    await client.query(
      `create table "${schema}".bait (aggregate_type text, aggregate_id text, payload "${schema}".payload_t,
         headers jsonb, processed_at timestamptz, dead_lettered_at timestamptz, text_bytes_bound integer, seq bigint)`,
    );
  });
}

const attack = () =>
  asRole(db.pool, attacker, async (client) => {
    await client.query(
      `create trigger bait_order before insert on "${schema}".bait
       for each row execute function ${PRIVATE}.outbox_commit_order()`,
    );
    await client.query(
      `insert into "${schema}".bait (aggregate_type, aggregate_id, payload, headers) values ('x', 'x', row('v'), '{}')`,
    );
  });

/** What the attack would have gained: the secret copied, another producer's event marked sent, a grant. */
async function gains(victimId: string | undefined) {
  const loot = await db.pool.query(`select count(*)::int as n from "${schema}".loot`);
  const victim = await db.pool.query("select processed_at from outbox_events where id = $1", [victimId]);
  const privilege = await db.pool.query(
    "select has_table_privilege($1, 'public.outbox_events', 'SELECT, UPDATE, DELETE') as any",
    [attacker],
  );
  return {
    secretRowsCopied: loot.rows[0].n,
    victimProcessedAt: victim.rows[0]?.processed_at,
    outboxPrivilege: privilege.rows[0].any,
  };
}

beforeAll(async () => {
  await db.pool.query(`create role ${attacker} nologin`);
  await db.pool.query(`grant insert on public.outbox_events to ${attacker}`);
  await db.pool.query(`create schema "${schema}" authorization ${attacker}`);
  await db.pool.query(`create table public."${secret}" (v text)`);
  await db.pool.query(`insert into public."${secret}" values ('what only the owner may read')`);
  await db.pool.query(`create role ${producer} nologin`);
  await db.pool.query(`grant insert, select (id, seq) on public.outbox_events to ${producer}`);
  await prepareAttack();
});

afterAll(async () => {
  for (const role of [attacker, producer]) {
    await db.pool.query(`drop owned by ${role} cascade`);
    await db.pool.query(`drop role ${role}`);
  }
});

describe("the commit-order trigger function (SECURITY DEFINER)", () => {
  it("cannot be attached to another table: the escalation of issue 28 fails and gains nothing", async () => {
    const [victim] = await withTransaction(db.pool, (client) => enqueue(client, [anEvent()]));

    await expect(attack()).rejects.toThrow(/permission denied for function .*outbox_commit_order/);

    expect(await gains(victim?.id)).toEqual({
      secretRowsCopied: 0,
      victimProcessedAt: null,
      outboxPrivilege: false,
    });
  });

  it("refuses to run for any table but its own, even where EXECUTE was granted by mistake", async () => {
    const [victim] = await withTransaction(db.pool, (client) => enqueue(client, [anEvent()]));
    await db.pool.query(`grant execute on function ${PRIVATE}.outbox_commit_order() to ${attacker}`);
    try {
      await expect(attack()).rejects.toThrow(
        /"outbox_private:public\.outbox_events"\."outbox_commit_order"\(\) runs only as the trigger of "public"\."outbox_events", not of \w+\.bait/,
      );
    } finally {
      await db.pool.query(`revoke execute on function ${PRIVATE}.outbox_commit_order() from ${attacker}`);
    }

    expect(await gains(victim?.id)).toEqual({
      secretRowsCopied: 0,
      victimProcessedAt: null,
      outboxPrivilege: false,
    });
  });

  it("still runs for producers, who hold INSERT only: a trigger's EXECUTE is checked at CREATE TRIGGER", async () => {
    const { rows: execute } = await db.pool.query(
      `select has_function_privilege($1, '${PRIVATE}.outbox_commit_order()', 'EXECUTE') as granted`,
      [producer],
    );
    expect(execute).toEqual([{ granted: false }]);

    const [event] = await asRole(db.pool, producer, (client) =>
      enqueue(client, [anEvent({ payload: { total: 4200 } })]),
    );

    const { rows } = await db.pool.query(
      "select seq, text_bytes_bound, processed_at from outbox_events where id = $1",
      [event?.id],
    );
    // The trigger ran: it drew the seq from the sequence and bounded the row's text ({"total": 4200} and {}).
    expect(rows).toEqual([{ seq: String(event?.seq), text_bytes_bound: 17, processed_at: null }]);
  });
});

describe("code that runs with the migration owner's rights", () => {
  it("is the commit-order trigger alone, and PUBLIC may execute none of it", async () => {
    const { rows } = await db.pool.query(
      `select p.proname as name,
              exists (select from aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) as a
                      where a.grantee = 0) as public_execute
       from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname in ('public', 'outbox_private:public.outbox_events') and p.prosecdef
       order by 1`,
    );
    expect(rows).toEqual([{ name: "outbox_commit_order", public_execute: false }]);
  });

  it("does not read the order key's state for a role that may read neither the outbox nor its sequence", async () => {
    await expect(
      asRole(db.pool, attacker, (client) =>
        client.query(`select * from ${PRIVATE}.outbox_order_key_state()`),
      ),
    ).rejects.toThrow(/permission denied for (function|sequence|table)/);
  });
});
