import { beforeAll, describe, expect, it } from "vitest";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { checkOrderKey } from "../../functions/shared/relay/orderKey.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { asRole, outboxRoles, uniqueRoleName } from "../support/roles.ts";

/** Issue 39, findings 8 and 10: the relay's and the purge's roles cannot stop or rewrite delivery (0016). */
const db = useTestDatabase();
const names = outboxNames();
let roles: { relay: string; purge: string };

beforeAll(async () => {
  roles = await outboxRoles(db.pool);
});

async function event(fields: { published?: boolean; dead?: boolean } = {}) {
  const [written] = await withTransaction(db.pool, (client) => enqueue(client, [anEvent()]));
  await db.pool.query(
    `update outbox_events set processed_at = case when $2 then now() end, dead_lettered_at = case when $3 then now() end
     where id = $1`,
    [written?.id, fields.published === true, fields.dead === true],
  );
  return { id: written?.id as string, seq: String(written?.seq), aggregateId: "" };
}

async function exists(id: string): Promise<boolean> {
  const { rows } = await db.pool.query("select 1 from outbox_events where id = $1", [id]);
  return rows.length === 1;
}

/** What Postgres answered a statement run as `role`, so an attack's every step is tried. */
async function tryAs(role: string, statement: string, values: unknown[] = []): Promise<string> {
  try {
    const result = await asRole(db.pool, role, (client) => client.query(statement, values));
    return `done: ${result.rowCount}`;
  } catch (error) {
    return (error as Error).message;
  }
}

describe("the purge's role writes only marks it derives (finding 8)", () => {
  it("cannot insert a mark that stops the relay: ('x', 9223372036854775807) is refused", async () => {
    await event();
    const answer = await tryAs(
      roles.purge,
      `insert into ${PRIVATE}.outbox_group_high_water (aggregate_id, purged_published_seq)
       values ('x', 9223372036854775807)`,
    );

    expect(answer).toMatch(/violates row-level security policy "marks_are_derived_on_insert"/);
    await expect(withTransaction(db.pool, (client) => checkOrderKey(client, names))).resolves.toBeUndefined();
  });

  it("cannot raise an existing mark past every seq either, nor through the relay's role", async () => {
    const published = await event({ published: true });
    const { rows } = await db.pool.query("select aggregate_id from outbox_events where id = $1", [
      published.id,
    ]);
    const group = rows[0].aggregate_id as string;
    await db.pool.query(
      `insert into ${PRIVATE}.outbox_group_high_water (aggregate_id, purged_published_seq) values ($1, $2)`,
      [group, published.seq],
    );

    const answers = [
      await tryAs(
        roles.purge,
        `update ${PRIVATE}.outbox_group_high_water set purged_published_seq = 9223372036854775807
         where aggregate_id = $1`,
        [group],
      ),
      await tryAs(
        roles.relay,
        `insert into ${PRIVATE}.outbox_group_high_water as h (aggregate_id, purged_published_seq)
         values ($1, 9223372036854775807)
         on conflict (aggregate_id) do update set purged_published_seq = excluded.purged_published_seq`,
        [group],
      ),
    ];

    expect(answers).toEqual([
      expect.stringMatching(/violates row-level security policy "marks_are_derived_on_update"/),
      expect.stringMatching(/violates row-level security policy "marks_are_derived_on_insert"/),
    ]);
    await expect(withTransaction(db.pool, (client) => checkOrderKey(client, names))).resolves.toBeUndefined();
  });
});

describe("the relay's role cannot delete history (finding 10)", () => {
  it("cannot un-mark a published row or a dead letter, so 0011's delete policy keeps them", async () => {
    const published = await event({ published: true });
    const dead = await event({ dead: true });

    const answers = [];
    for (const row of [published, dead]) {
      answers.push(
        await tryAs(
          roles.relay,
          "update outbox_events set processed_at = null, dead_lettered_at = null where id = $1",
          [row.id],
        ),
        await tryAs(roles.relay, "delete from outbox_events where id = $1", [row.id]),
      );
    }

    expect(answers).toEqual(["done: 0", "done: 0", "done: 0", "done: 0"]);
    expect([await exists(published.id), await exists(dead.id)]).toEqual([true, true]);
    const { rows } = await db.pool.query(
      "select processed_at is not null as published, dead_lettered_at is not null as dead from outbox_events where id = any($1::uuid[]) order by seq",
      [[published.id, dead.id]],
    );
    expect(rows).toEqual([
      { published: true, dead: false },
      { published: false, dead: true },
    ]);
  });

  it("still records the outcomes of pending rows: marks, fails and dead-letters them", async () => {
    const [marked, failed, dead] = [await event(), await event(), await event()];
    const answers = [
      await tryAs(roles.relay, "update outbox_events set processed_at = now() where id = $1", [marked.id]),
      await tryAs(roles.relay, "update outbox_events set attempts = attempts + 1 where id = $1", [failed.id]),
      await tryAs(roles.relay, "update outbox_events set dead_lettered_at = now() where id = $1", [dead.id]),
    ];
    expect(answers).toEqual(["done: 1", "done: 1", "done: 1"]);
  });
});

describe("what held in issue 39's round, kept as tests", () => {
  it("a producer with the documented grants cannot touch limits, marks, the counter, or published and dead state", async () => {
    const producer = uniqueRoleName("producer");
    await db.pool.query(`create role ${producer} nologin`);
    await db.pool.query(`grant insert, select (id, seq) on public.outbox_events to ${producer}`);
    try {
      const pending = await event();
      const answers = [
        await tryAs(producer, `update ${PRIVATE}.outbox_limits set max_payload_bytes = 67108864`),
        await tryAs(producer, `insert into ${PRIVATE}.outbox_group_high_water values ('x', 1)`),
        await tryAs(
          producer,
          `update ${PRIVATE}.outbox_deleted_on_publish set highest_seq = 9223372036854775807`,
        ),
        await tryAs(producer, "update outbox_events set processed_at = now() where id = $1", [pending.id]),
        await tryAs(producer, "delete from outbox_events where id = $1", [pending.id]),
        await tryAs(producer, `create table ${PRIVATE}.planted (v int)`),
      ];
      expect(answers).toEqual(Array(6).fill(expect.stringMatching(/permission denied/)));
      expect(await exists(pending.id)).toBe(true);
    } finally {
      await db.pool.query(`drop owned by ${producer}`);
      await db.pool.query(`drop role ${producer}`);
    }
  });

  it("the relay's role cannot lower a mark either", async () => {
    const published = await event({ published: true });
    const { rows } = await db.pool.query("select aggregate_id from outbox_events where id = $1", [
      published.id,
    ]);
    const group = rows[0].aggregate_id as string;
    await db.pool.query(
      `insert into ${PRIVATE}.outbox_group_high_water (aggregate_id, purged_published_seq) values ($1, $2)`,
      [group, published.seq],
    );

    await tryAs(
      roles.relay,
      `update ${PRIVATE}.outbox_group_high_water set purged_published_seq = 0 where aggregate_id = $1`,
      [group],
    );

    const { rows: mark } = await db.pool.query(
      `select purged_published_seq::text as seq from ${PRIVATE}.outbox_group_high_water where aggregate_id = $1`,
      [group],
    );
    expect(mark).toEqual([{ seq: published.seq }]);
  });
});
