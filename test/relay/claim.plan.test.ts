import { describe, expect, it } from "vitest";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { useTestDatabase } from "../support/db.ts";
import { explainClaim, type PlanNode } from "../support/explainClaim.ts";

const db = useTestDatabase();

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

describe("claim query plan", () => {
  // The normal state of a healthy outbox: the last ANALYZE saw nothing pending. Then a backlog builds
  // (an outage, a burst), with a hot aggregate of 20,000 waiting rows among many others.
  it("descends the pending index once per aggregate even when statistics saw no pending row", async () => {
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at)
       select 'order', 'done-' || (g % 500), 'e', '{}', now() - interval '2 days', now() - interval '2 days'
       from generate_series(1, 50000) as g`,
    );
    await db.pool.query("vacuum analyze outbox_events");
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
       select 'order', 'agg-0000', 'e', '{}'::jsonb from generate_series(1, 20000)
       union all
       select 'order', 'agg-' || lpad((g % 500)::text, 4, '0'), 'e', '{}' from generate_series(1, 2000) as g`,
    );

    // Strict mode walks the live rows' and the dead letters' indexes side by side (migration 0014).
    for (const [strictOrder, walked] of [
      [false, ["outbox_pending_group_live"]],
      [true, ["outbox_pending_dead", "outbox_pending_group_live"]],
    ] as const) {
      const all = nodes(await explainClaim(db.pool, outboxNames(), { limit: 100, strictOrder }));

      // What stale statistics tempt the planner into: reading a whole pending index (or the table) and sorting
      // it for every step of the walk (30 s per claim over 200,000 waiting rows, with the old pending_seq).
      const sortsOfTable = all.filter(
        (node) =>
          node["Node Type"] === "Sort" &&
          nodes(node).some((below) => below["Relation Name"] === "outbox_events"),
      );
      expect(sortsOfTable).toEqual([]);
      expect(all.filter((node) => node["Node Type"] === "Seq Scan")).toEqual([]);
      const scans = all.filter((node) => node["Index Name"] !== undefined);
      expect([...new Set(scans.map((node) => node["Index Name"]))].sort()).toEqual(walked);
      // The walk: one descent per aggregate (100 claimed, one of them the hot aggregate's head), a few
      // buffers each, not the 20,000 rows waiting behind agg-0000.
      for (const scan of scans) {
        const loops = scan["Actual Loops"] ?? 0;
        expect(loops).toBeLessThanOrEqual(100);
        expect((scan["Shared Hit Blocks"] ?? Number.POSITIVE_INFINITY) / Math.max(loops, 1)).toBeLessThan(10);
      }
    }
  });
});
