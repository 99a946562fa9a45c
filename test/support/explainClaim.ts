import type pg from "pg";
import type { Queryable } from "../../functions/shared/db/session.ts";
import type { OutboxNames } from "../../functions/shared/outbox/names.ts";
import { claimBatch } from "../../functions/shared/relay/sql/claimBatch.ts";

export interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Actual Rows"?: number;
  "Actual Loops"?: number;
  "Shared Hit Blocks"?: number;
  "Shared Read Blocks"?: number;
  Plans?: PlanNode[];
}

/** A plan's nodes, the root first. */
export function planNodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(planNodes)];
}

/**
 * Runs claimBatch's own SQL under EXPLAIN (ANALYZE, BUFFERS) in a transaction that is rolled back (nothing stays
 * locked), and returns the plan: what the claim did, read from the server rather than timed.
 */
export async function explainClaim(
  pool: pg.Pool,
  names: OutboxNames,
  options: { limit: number; strictOrder: boolean },
): Promise<PlanNode> {
  const client = await pool.connect();
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
    await claimBatch(explaining, names, options);
  } finally {
    await client.query("rollback");
    client.release();
  }
  if (plan === undefined) throw new Error("claimBatch ran no statement to explain");
  return plan;
}
