import type { SessionClient, SessionPool } from "../../functions/shared/db.ts";

/** `claim` includes loading the payloads (sql/loadPayloads.ts and its savepoint); `tx`: begin, set_config, commit. */
export type RoundPhase = "claim" | "publish" | "record" | "tx";

/** Milliseconds per phase, summed over every round that went through the pool. */
export type PhaseTotals = Record<RoundPhase, number>;

/**
 * Wraps the relay's pool to see where a round's time goes without touching the engine: each round is one
 * checked-out session running begin, set_config, the claim, (SQS publishing: no SQL), the record UPDATE and
 * commit. The time between the claim returning and the UPDATE starting is the publish phase.
 */
export function profiledPool(pool: SessionPool): { pool: SessionPool; totals: PhaseTotals } {
  const totals: PhaseTotals = { claim: 0, publish: 0, record: 0, tx: 0 };
  return {
    totals,
    pool: {
      async connect(): Promise<SessionClient> {
        const client = await pool.connect();
        let claimEnded: number | undefined;
        return {
          release: (destroy) => client.release(destroy),
          ...(client.on ? { on: client.on.bind(client) } : {}),
          ...(client.off ? { off: client.off.bind(client) } : {}),
          async query(text, values) {
            const phase = phaseOf(text);
            const started = performance.now();
            if (phase === "record" && claimEnded !== undefined) totals.publish += started - claimEnded;
            const result = await client.query(text, values);
            const ended = performance.now();
            totals[phase] += ended - started;
            claimEnded = phase === "claim" ? ended : undefined;
            return result;
          },
        };
      },
    },
  };
}

function phaseOf(sql: string): RoundPhase {
  if (sql.includes("skip locked") || sql.includes("load_payloads") || sql.includes("pg_column_size")) {
    return "claim";
  }
  if (sql.trimStart().startsWith("update")) return "record";
  return "tx";
}
