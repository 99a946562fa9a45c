import type pg from "pg";
import type { Queryable } from "../../functions/shared/db/session.ts";
import { SQS_MAX_MESSAGE_BYTES } from "../../functions/shared/destinations/sqs/limits.ts";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { DEFAULT_RELAY_OPTIONS } from "../../functions/shared/relay/engine.ts";
import { claimBatch, newClaimCursor } from "../../functions/shared/relay/sql/claimBatch.ts";
import { loadPayloads, type PayloadLimits } from "../../functions/shared/relay/sql/loadPayloads.ts";
import { loadPayloadsByWalk } from "../../test/support/loadPayloads.ts";
import { type BacklogShape, resetOutbox, seedBacklog } from "../lib/benchDatabase.ts";
import { isDirectLoad, type LoadVariant } from "../lib/roundProfile.ts";
import { median, percentile } from "../lib/stats.ts";

export interface LoadSqlTimings {
  rounds: number;
  /** Client-observed ms of the claim statement, the same for both variants (a control). */
  claimP50: number;
  /** Client-observed ms of loadPayloads for a claim of `batchSize` rows (every statement it sends). */
  loadP50: number;
  loadP99: number;
  /** Statements loadPayloads sent per round. */
  statements: number;
  /** EXPLAIN (ANALYZE, BUFFERS) of its data statement (the walk, or the direct statement), median of 30. */
  explain: { executionMs: number; planningMs: number; sharedHit: number };
}

export type LoadSqlAb = { batchSize: number; rowsPerAggregate: number } & Record<LoadVariant, LoadSqlTimings>;

const ROUNDS = 300;
const EXPLAINS = 30;

/**
 * The payload load's SQL cost per round, the walk alone (as before 2026-12-01's direct statement) against
 * loadPayloads as shipped, interleaved round by round on one session: begin, the relay's timeouts, the claim
 * (the round robin carried on), the load, rollback. The bench backlog's rows (~180-byte payloads, one header),
 * so the direct statement settles every row.
 */
export async function measureLoadSql(pool: pg.Pool, shape: BacklogShape): Promise<LoadSqlAb> {
  await resetOutbox(pool);
  await seedBacklog(pool, shape);
  await pool.query("vacuum analyze outbox_events");
  const names = outboxNames();
  const limit = DEFAULT_RELAY_OPTIONS.batchSize;
  const limits: PayloadLimits = {
    maxMessageBytes: SQS_MAX_MESSAGE_BYTES,
    budgetBytes: DEFAULT_RELAY_OPTIONS.batchMaxBytes,
  };
  const load = { direct: loadPayloads, walk: loadPayloadsByWalk };
  const timings = {
    direct: { claim: [] as number[], load: [] as number[], statements: 0 },
    walk: { claim: [] as number[], load: [] as number[], statements: 0 },
  };
  const captured: Record<LoadVariant, { text: string; values: unknown[] } | undefined> = {
    direct: undefined,
    walk: undefined,
  };
  const cursor = newClaimCursor();
  const client = await pool.connect();
  try {
    for (let i = 0; i < ROUNDS; i++) {
      for (const variant of i % 2 === 0 ? (["walk", "direct"] as const) : (["direct", "walk"] as const)) {
        await client.query("begin");
        await client.query("select set_config('statement_timeout', $1, true)", [
          String(DEFAULT_RELAY_OPTIONS.statementTimeoutMs),
        ]);
        const claimStarted = performance.now();
        const rows = await claimBatch(client, names, { limit, strictOrder: false, cursor });
        const loadStarted = performance.now();
        let statements = 0;
        const session: Queryable = client;
        const counting: Queryable = {
          // biome-ignore lint/suspicious/noExplicitAny: Queryable's own signature.
          query<R = any>(text: string, values?: unknown[]) {
            statements++;
            if (!text.startsWith("savepoint") && !text.startsWith("release"))
              captured[variant] = { text, values: values ?? [] };
            return session.query<R>(text, values);
          },
        };
        const ids = rows.toSorted((a, b) => (BigInt(a.seq) < BigInt(b.seq) ? -1 : 1)).map((row) => row.id);
        const loaded = await load[variant](counting, names, ids, limits);
        const loadEnded = performance.now();
        await client.query("rollback");
        if (loaded.filter((row) => row.status === "loaded").length !== limit) {
          throw new Error(`${variant}: loaded ${loaded.length} of ${limit} rows`);
        }
        timings[variant].claim.push(loadStarted - claimStarted);
        timings[variant].load.push(loadEnded - loadStarted);
        timings[variant].statements = statements;
      }
    }
    const result = { batchSize: limit, rowsPerAggregate: shape.events / shape.aggregates } as LoadSqlAb;
    for (const variant of ["direct", "walk"] as const) {
      const statement = captured[variant];
      if (statement === undefined) throw new Error(`${variant}: no statement captured`);
      if (variant === "direct" && !isDirectLoad(statement.text)) throw new Error("direct: the walk ran");
      result[variant] = {
        rounds: ROUNDS,
        claimP50: median(timings[variant].claim),
        loadP50: median(timings[variant].load),
        loadP99: percentile(timings[variant].load, 99),
        statements: timings[variant].statements,
        explain: await explain(client, statement),
      };
    }
    return result;
  } finally {
    await client.query("rollback").catch(() => {});
    client.release();
  }
}

/** EXPLAIN (ANALYZE, BUFFERS) of one load statement on the rows of a fresh claim, median of EXPLAINS runs. */
async function explain(client: pg.PoolClient, statement: { text: string; values: unknown[] }) {
  const runs: { executionMs: number; planningMs: number; sharedHit: number }[] = [];
  for (let i = 0; i < EXPLAINS; i++) {
    await client.query("begin");
    try {
      const { rows } = await client.query<{ "QUERY PLAN": ExplainJson[] }>(
        `explain (analyze, buffers, format json) ${statement.text}`,
        statement.values,
      );
      const [root] = rows[0]?.["QUERY PLAN"] ?? [];
      if (root === undefined) throw new Error("EXPLAIN returned no plan");
      runs.push({
        executionMs: root["Execution Time"],
        planningMs: root["Planning Time"],
        sharedHit: root.Plan["Shared Hit Blocks"] ?? 0,
      });
    } finally {
      await client.query("rollback");
    }
  }
  return {
    executionMs: median(runs.map((run) => run.executionMs)),
    planningMs: median(runs.map((run) => run.planningMs)),
    sharedHit: median(runs.map((run) => run.sharedHit)),
  };
}

interface ExplainJson {
  "Execution Time": number;
  "Planning Time": number;
  Plan: { "Shared Hit Blocks"?: number };
}
