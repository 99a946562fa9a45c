import type { Notification } from "pg";
import type { SessionClient, SessionPool } from "./db.ts";
import { type OutboxLocation, outboxNames, quoteIdent } from "./identifiers.ts";

interface ListeningClient extends SessionClient {
  on(event: "notification", listener: (message: Notification) => void): unknown;
  on(event: "error", listener: (error: Error) => void): unknown;
}

export interface WakeUp {
  /** Resolves after `ms`, or earlier when the outbox trigger notifies or `signal` aborts. */
  wait(ms: number, signal?: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

/**
 * Holds one pooled session in LISTEN on the outbox table's channel (see migration 0002 for the trigger and its
 * cost). A notification that arrives while the relay is busy is remembered, so the next wait returns at once.
 * If the session dies, waits fall back to plain timers: polling still bounds the latency.
 */
export async function listenForOutboxInserts(
  pool: SessionPool,
  location: OutboxLocation = {},
): Promise<WakeUp> {
  const { table } = outboxNames(location);
  const client = (await pool.connect()) as ListeningClient;
  let pending = false;
  let wake: (() => void) | undefined;
  let broken = false;
  client.on("notification", () => {
    pending = true;
    wake?.();
  });
  client.on("error", () => {
    broken = true;
    wake?.();
  });
  await client.query(`listen ${quoteIdent(table)}`);

  return {
    wait(ms, signal) {
      if (pending || signal?.aborted) {
        pending = false;
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", done);
          wake = undefined;
          pending = false;
          resolve();
        };
        const timer = setTimeout(done, ms);
        signal?.addEventListener("abort", done, { once: true });
        if (!broken) wake = done;
      });
    },
    async close() {
      if (broken) return client.release(true);
      await client.query(`unlisten ${quoteIdent(table)}`).catch(() => {});
      client.release();
    },
  };
}
