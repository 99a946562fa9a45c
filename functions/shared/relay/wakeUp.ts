import type { Notification } from "pg";
import type { SessionClient, SessionPool } from "../db/session.ts";
import { type OutboxLocation, outboxNames, quoteIdent } from "../outbox/names.ts";

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
  let broken = false;
  // Every waiting loop (one per parallel round) is woken by a notification.
  const waiters = new Set<() => void>();
  const wakeAll = () => {
    for (const wake of [...waiters]) wake();
  };
  client.on("notification", () => {
    pending = waiters.size === 0; // remembered only if nobody was waiting to take it
    wakeAll();
  });
  client.on("error", () => {
    broken = true;
    wakeAll();
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
          waiters.delete(done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        signal?.addEventListener("abort", done, { once: true });
        if (!broken) waiters.add(done);
      });
    },
    async close() {
      if (broken) return client.release(true);
      await client.query(`unlisten ${quoteIdent(table)}`).catch(() => {});
      client.release();
    },
  };
}
