import { describe, expect, it } from "vitest";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";

const db = useTestDatabase();

/**
 * The index entries a row costs (each is a B-tree insert in the WAL, ~64 B, plus its share of page splits;
 * docs/benchmarks.md, "Where the bytes go"): the indexes whose predicate the row matches, evaluated on the row.
 */
async function indexesHolding(id: string): Promise<string[]> {
  const { rows: indexes } = await db.pool.query<{ name: string; predicate: string | null }>(
    `select c.relname as name, pg_get_expr(i.indpred, i.indrelid) as predicate
     from pg_index as i join pg_class as c on c.oid = i.indexrelid
     where i.indrelid = 'outbox_events'::regclass`,
  );
  const holding: string[] = [];
  for (const index of indexes) {
    const { rows } = await db.pool.query(
      `select 1 from outbox_events where id = $1 and (${index.predicate ?? "true"})`,
      [id],
    );
    if (rows.length > 0) holding.push(index.name);
  }
  return holding.sort();
}

describe("index entries per event (issue 33: the write cost)", () => {
  it("an insert writes three: the id, the seq and the live pending rows' group index", async () => {
    const [event] = await enqueueCommitted(db.pool, [anEvent()]);
    expect(await indexesHolding(event?.id ?? "")).toEqual([
      "outbox_events_pkey",
      "outbox_pending_group_live",
      "outbox_seq",
    ]);
  });

  it("a dead letter is in the dead letters' indexes, not the live one", async () => {
    const [event] = await enqueueCommitted(db.pool, [anEvent()]);
    await db.pool.query("update outbox_events set dead_lettered_at = now() where id = $1", [event?.id]);
    expect(await indexesHolding(event?.id ?? "")).toEqual([
      "outbox_dead_lettered_at",
      "outbox_events_pkey",
      "outbox_pending_dead",
      "outbox_seq",
    ]);
  });
});
