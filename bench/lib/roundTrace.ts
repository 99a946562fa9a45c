import type { SessionClient, SessionPool } from "../../functions/shared/db/session.ts";
import { phaseOf } from "./roundProfile.ts";
import { epochNow } from "./threadPauses.ts";

/** One relay round as the pool saw it, epoch ms and ms per phase. */
export interface RoundTrace {
  /** The round asked the pool for a session. */
  startedAt: number;
  /** Released its session (after COMMIT or ROLLBACK). */
  endedAt: number;
  /** Waiting for a session of the relay's pool. */
  connectMs: number;
  /** BEGIN and the transaction-local settings. */
  txMs: number;
  claimMs: number;
  loadMs: number;
  /** From the load returning to the record UPDATE starting: preparing and sending the messages. */
  publishMs: number;
  recordMs: number;
  commitMs: number;
  /** Rows the claim returned. */
  rows: number;
  /**
   * Time since one of the loops' previous round ended: the loop's idle wait (dwell pause, or a wake-up).
   * Loops are interchangeable to the pool, so rounds are matched to the earliest unmatched end (first in,
   * first out); undefined for a loop's first round.
   */
  idleBeforeMs?: number;
}

export type RoundPhaseName = "connect" | "tx" | "claim" | "load" | "publish" | "record" | "commit" | "idle";

/**
 * Wraps the relay's pool and records every round's phase timestamps, without touching the engine (each round
 * is one checked-out session: begin, set_config, claim, load, publish with no SQL, record, commit). Keeps the
 * last claim statement, so the database watch can EXPLAIN exactly what the relay runs.
 */
export function tracedPool(pool: SessionPool): {
  pool: SessionPool;
  rounds: RoundTrace[];
  lastClaim(): { text: string; values: unknown[] } | undefined;
} {
  const rounds: RoundTrace[] = [];
  const ends: number[] = [];
  let claim: { text: string; values: unknown[] } | undefined;
  return {
    rounds,
    lastClaim: () => claim,
    pool: {
      async connect(): Promise<SessionClient> {
        const startedAt = epochNow();
        const previousEnd = ends.shift();
        const client = await pool.connect();
        const round: RoundTrace = {
          startedAt,
          endedAt: Number.NaN,
          connectMs: epochNow() - startedAt,
          txMs: 0,
          claimMs: 0,
          loadMs: 0,
          publishMs: 0,
          recordMs: 0,
          commitMs: 0,
          rows: 0,
          ...(previousEnd === undefined ? {} : { idleBeforeMs: startedAt - previousEnd }),
        };
        let loadEnded: number | undefined;
        return {
          release(destroy) {
            round.endedAt = epochNow();
            rounds.push(round);
            ends.push(round.endedAt);
            client.release(destroy);
          },
          ...(client.on ? { on: client.on.bind(client) } : {}),
          ...(client.off ? { off: client.off.bind(client) } : {}),
          async query(text, values) {
            const phase = phaseOf(text);
            const started = epochNow();
            if (phase === "record" && loadEnded !== undefined) round.publishMs += started - loadEnded;
            if (phase === "claim") claim = { text, values: values ?? [] };
            try {
              const result = await client.query(text, values);
              if (phase === "claim") round.rows = result.rowCount ?? result.rows.length;
              return result;
            } finally {
              const ms = epochNow() - started;
              if (phase === "tx" && /^\s*(commit|rollback)/i.test(text)) round.commitMs += ms;
              else round[`${phase}Ms`] += ms;
              loadEnded = phase === "claim" || phase === "load" ? epochNow() : undefined;
            }
          },
        };
      },
    },
  };
}

/** Total time of a round from asking for a session to releasing it. */
export const roundMs = (round: RoundTrace) => round.endedAt - round.startedAt;

/** The phase that took the longest in a round (idle excluded: it is before the round). */
export function dominantPhase(round: RoundTrace): { phase: RoundPhaseName; ms: number } {
  const phases: [RoundPhaseName, number][] = [
    ["connect", round.connectMs],
    ["tx", round.txMs],
    ["claim", round.claimMs],
    ["load", round.loadMs],
    ["publish", round.publishMs],
    ["record", round.recordMs],
    ["commit", round.commitMs],
  ];
  const [phase, ms] = phases.reduce((a, b) => (b[1] > a[1] ? b : a));
  return { phase, ms };
}
