import { describe, expect, it } from "vitest";
import type { Queryable } from "../functions/shared/db.ts";
import { outboxNames } from "../functions/shared/identifiers.ts";
import { claimBatch } from "../functions/shared/sql/claimBatch.ts";
import { useTestDatabase } from "./support/db.ts";

const db = useTestDatabase();

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Join Type"?: string;
  "Actual Loops"?: number;
  "Shared Hit Blocks"?: number;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/** Runs claimBatch's own SQL under EXPLAIN ANALYZE (rolled back), returning the plan. */
async function explainClaim(strictOrder: boolean): Promise<PlanNode> {
  const client = await db.pool.connect();
  let plan: PlanNode | undefined;
  const explaining: Queryable = {
    async query(text, values) {
      const result = await client.query(`explain (analyze, buffers, format json) ${text}`, values);
      plan = result.rows[0]["QUERY PLAN"][0].Plan;
      return { rows: [], rowCount: 0 };
    },
  };
  try {
    await client.query("begin");
    await claimBatch(explaining, outboxNames(), { limit: 100, strictOrder });
  } finally {
    await client.query("rollback");
    client.release();
  }
  if (plan === undefined) throw new Error("no plan");
  return plan;
}

describe("claim query plan", () => {
  // The normal state of a healthy outbox: the last ANALYZE saw nothing pending. Then a backlog builds
  // (an outage, a burst), with a hot aggregate at its front and many others behind it.
  it("probes each candidate's aggregate with one index descent even when statistics saw no pending row", async () => {
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at)
       select 'order', 'done-' || (g % 500), 'e', '{}', now() - interval '2 days', now() - interval '2 days'
       from generate_series(1, 50000) as g`,
    );
    await db.pool.query("vacuum analyze outbox_events");
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload)
       select 'order', 'hot', 'e', '{}'::jsonb from generate_series(1, 1000)
       union all
       select 'order', 'agg-' || (g % 500), 'e', '{}' from generate_series(1, 2000) as g`,
    );

    for (const strictOrder of [false, true]) {
      const plan = await explainClaim(strictOrder);
      const all = nodes(plan);

      // No anti-join rescanning a pending index per candidate (the plan NOT EXISTS gets on such statistics).
      expect(all.filter((node) => node["Join Type"] === "Anti")).toEqual([]);
      const scans = all.filter((node) => node["Index Name"] !== undefined);
      expect(scans.map((node) => node["Index Name"]).sort()).toEqual([
        "outbox_pending_aggregate",
        "outbox_pending_seq",
      ]);
      // 1,000 hot rows are walked past (not heads), then 100 heads: each lookup a few buffers, not thousands.
      const probe = scans.find((node) => node["Index Name"] === "outbox_pending_aggregate");
      const loops = probe?.["Actual Loops"] ?? 0;
      expect(loops).toBeGreaterThanOrEqual(1_000);
      expect((probe?.["Shared Hit Blocks"] ?? Number.POSITIVE_INFINITY) / loops).toBeLessThan(10);
    }
  });
});
