import { describe, expect, it } from "vitest";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { redriveDeadLetters } from "../../functions/shared/operate/sql/redriveDeadLetters.ts";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { DEFAULT_PURGE_OPTIONS, runPurge } from "../../functions/shared/purge/purge.ts";
import { recordOutcomes } from "../../functions/shared/relay/sql/recordOutcomes.ts";
import { waitFor } from "../chaos/support/waitFor.ts";
import { useTestDatabase } from "../support/db.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { openSession } from "../support/sessions.ts";

/**
 * Issue 21, finding 3: redrive's "overtaken" looked for a later published row of the aggregate; the purge deletes
 * published rows after a week, dead letters stay, so the warning went false once the purge had run. A successor
 * claimed by a relay but not yet recorded was missed the same way.
 */
const db = useTestDatabase();
const names = outboxNames({});

async function insert(group: string, state: "dead" | "published" | "pending", publishedDaysAgo = 0) {
  const { rows } = await db.pool.query<{ id: string; seq: string }>(
    `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, attempts, dead_lettered_at, processed_at)
     values ('order', $1, 'e', '{}', $2, $3, $4) returning id, seq`,
    [
      group,
      state === "dead" ? 10 : 0,
      state === "dead" ? new Date() : null,
      state === "published" ? new Date(Date.now() - publishedDaysAgo * 86_400_000) : null,
    ],
  );
  return rows[0] as { id: string; seq: string };
}

describe("redrive knows what it overtakes", () => {
  it("after the purge deleted the published successor (the group's high-water mark outlives it)", async () => {
    const group = `purged-${Date.now()}`;
    const dead = await insert(group, "dead");
    await insert(group, "published", 30);
    const summary = await runPurge(
      { pool: db.pool, deadline: Date.now() + 60_000 },
      { ...DEFAULT_PURGE_OPTIONS },
    );
    expect(summary.deletedRows).toBeGreaterThanOrEqual(1);

    const redriven = await withTransaction(db.pool, (client) =>
      redriveDeadLetters(client, names, { ids: [dead.id] }),
    );

    expect(redriven).toMatchObject([{ id: dead.id, overtaken: true }]);
  });

  it("is false when nothing later of the group was published (the redriven event goes first)", async () => {
    const group = `first-${Date.now()}`;
    const dead = await insert(group, "dead");
    await insert(group, "pending");
    const redriven = await withTransaction(db.pool, (client) =>
      redriveDeadLetters(client, names, { ids: [dead.id] }),
    );
    expect(redriven).toMatchObject([{ id: dead.id, overtaken: false }]);
  });
});

/** Published by the relay's own record statement, in each retention mode (migration 0011). */
describe.each(["keep", "delete"] as const)("redrive knows what it overtakes, retention %s", (retention) => {
  it("after the relay published the successor and the purge ran (the rows are gone)", async () => {
    const group = `relayed-${retention}-${Date.now()}`;
    const dead = await insert(group, "dead");
    const successor = await insert(group, "pending");
    await withTransaction(db.pool, (client) =>
      recordOutcomes(client, names, [{ id: successor.id, published: true }], retention),
    );
    await db.pool.query("update outbox_events set processed_at = now() - interval '30 days' where id = $1", [
      successor.id,
    ]);
    await runPurge({ pool: db.pool, deadline: Date.now() + 60_000 }, { ...DEFAULT_PURGE_OPTIONS });
    const { rows: left } = await db.pool.query("select id from outbox_events where id = $1", [successor.id]);
    expect(left).toEqual([]);

    const redriven = await withTransaction(db.pool, (client) =>
      redriveDeadLetters(client, names, { ids: [dead.id] }),
    );

    expect(redriven).toMatchObject([{ id: dead.id, overtaken: true }]);
  });

  it("a group without a dead letter gets no high-water mark from the relay (its events pay nothing for it)", async () => {
    const group = `plain-${retention}-${Date.now()}`;
    const event = await insert(group, "pending");
    await withTransaction(db.pool, (client) =>
      recordOutcomes(client, names, [{ id: event.id, published: true }], retention),
    );
    const { rows } = await db.pool.query(
      `select 1 from ${PRIVATE}.outbox_group_high_water where aggregate_id = $1`,
      [group],
    );
    expect(rows).toEqual([]);
  });

  it("when the successor is claimed by a relay but not yet recorded: waits for that round, then says so", async () => {
    const group = `claimed-${retention}-${Date.now()}`;
    const dead = await insert(group, "dead");
    const successor = await insert(group, "pending");
    const relay = await openSession(db.url);
    await relay.client.query("begin");
    await relay.client.query("select 1 from outbox_events where id = $1 for update skip locked", [
      successor.id,
    ]);

    const redrive = withTransaction(db.pool, (client) =>
      redriveDeadLetters(client, names, { ids: [dead.id] }),
    );
    await waitFor(
      "the redrive to wait for the relay's round",
      async () => {
        const { rows } = await db.pool.query<{ n: number }>(
          "select count(*)::int as n from pg_locks where not granted and pid <> $1",
          [relay.pid],
        );
        return (rows[0]?.n ?? 0) > 0;
      },
      10_000,
    );
    await recordOutcomes(relay.client, names, [{ id: successor.id, published: true }], retention);
    await relay.client.query("commit");
    await relay.client.end();

    expect(await redrive).toMatchObject([{ id: dead.id, overtaken: true }]);
  });
});
