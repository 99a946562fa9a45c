import type { SessionClient, SessionPool } from "../../functions/shared/db/session.ts";

/**
 * `claim`: the claim statement. `load`: loading the payloads (sql/loadPayloads.ts: its direct statement, and the
 * walk with its savepoints when rows need it). `tx`: begin, set_config, commit.
 */
export type RoundPhase = "claim" | "load" | "publish" | "record" | "tx";

/** Milliseconds per phase, summed over every round that went through the pool. */
export type PhaseTotals = Record<RoundPhase, number>;

/**
 * How loadPayloads runs: `direct` as shipped; `walk` every row through the walk, as before the direct statement
 * (2026-12-01): the pool answers the direct statement with no rows without sending it, so loadPayloads hands
 * every row to the walk with the whole budget. The same engine code either way, so one run can interleave both.
 */
export type LoadVariant = "direct" | "walk";

/**
 * Wraps the relay's pool to see where a round's time goes without touching the engine: each round is one
 * checked-out session running begin, set_config, the claim, the payload load, (SQS publishing: no SQL), the
 * record UPDATE and commit. The time between the load returning and the UPDATE starting is the publish phase.
 */
export function profiledPool(
  pool: SessionPool,
  variant: LoadVariant = "direct",
): { pool: SessionPool; totals: PhaseTotals } {
  const totals: PhaseTotals = { claim: 0, load: 0, publish: 0, record: 0, tx: 0 };
  return {
    totals,
    pool: {
      async connect(): Promise<SessionClient> {
        const client = await pool.connect();
        let loadEnded: number | undefined;
        return {
          release: (destroy) => client.release(destroy),
          ...(client.on ? { on: client.on.bind(client) } : {}),
          ...(client.off ? { off: client.off.bind(client) } : {}),
          async query(text, values) {
            if (variant === "walk" && isDirectLoad(text)) {
              return { rows: [], rowCount: 0 } as unknown as Awaited<ReturnType<SessionClient["query"]>>;
            }
            const phase = phaseOf(text);
            const started = performance.now();
            if (phase === "record" && loadEnded !== undefined) totals.publish += started - loadEnded;
            const result = await client.query(text, values);
            const ended = performance.now();
            totals[phase] += ended - started;
            loadEnded = phase === "claim" || phase === "load" ? ended : undefined;
            return result;
          },
        };
      },
    },
  };
}

/** loadPayloads' direct statement: the only one that asks for pg_column_compression. */
export function isDirectLoad(sql: string): boolean {
  return sql.includes("pg_column_compression");
}

export function phaseOf(sql: string): RoundPhase {
  if (sql.includes("skip locked")) return "claim";
  if (sql.includes("load_payload") || sql.includes("pg_column_size")) return "load";
  if (sql.trimStart().startsWith("update")) return "record";
  return "tx";
}
