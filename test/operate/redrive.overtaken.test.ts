import { describe, expect, it } from "vitest";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { redriveDeadLetters } from "../../functions/shared/operate/sql/redriveDeadLetters.ts";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { DEFAULT_PURGE_OPTIONS, runPurge } from "../../functions/shared/purge/purge.ts";
import { waitFor } from "../chaos/support/waitFor.ts";
import { useTestDatabase } from "../support/db.ts";
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

  it("when the successor is claimed by a relay but not yet recorded: waits for that round, then says so", async () => {
    const group = `claimed-${Date.now()}`;
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
    await relay.client.query("update outbox_events set processed_at = clock_timestamp() where id = $1", [
      successor.id,
    ]);
    await relay.client.query("commit");
    await relay.client.end();

    expect(await redrive).toMatchObject([{ id: dead.id, overtaken: true }]);
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
