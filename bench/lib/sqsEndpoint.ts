import { Worker } from "node:worker_threads";
import type { ThreadPauses } from "./threadPauses.ts";

/** What the bench needs from a delivery: which event, and when the endpoint accepted it (epoch ms). */
export interface AcceptedSend {
  dedupId: string;
  at: number;
}

export interface BenchSqsEndpoint {
  url: string;
  /** Added before every request is answered (typical in-region SQS: ~20 ms). */
  setLatency(ms: number): Promise<void>;
  /** Accepted sends and EventBridge events since the last call (and forgets them), duplicates included. */
  takeDeliveries(): Promise<AcceptedSend[]>;
  /** CPU time the endpoint's thread has used, ms. */
  cpuMs(): Promise<number>;
  /** Starts watching the endpoint thread's event loop and GC (lib/threadPauses.ts); `stop` returns what it saw. */
  watch(): Promise<{ stop(): Promise<ThreadPauses> }>;
  close(): Promise<void>;
}

export type EndpointCommand =
  | { kind: "latency"; ms: number }
  | { kind: "take" }
  | { kind: "cpu" }
  | { kind: "watch" }
  | { kind: "unwatch" };
export type EndpointRequest = EndpointCommand & { id: number };
export type EndpointReply = {
  id: number;
  deliveries?: AcceptedSend[];
  cpuMs?: number;
  pauses?: ThreadPauses;
};

/**
 * Runs cli/dev/aws/fakeSqs.ts on a worker thread. In production SQS's own work happens on AWS's machines; in one
 * thread with the relay, the fake's JSON parsing and MD5s would be charged to the relay's event loop (measured:
 * 6.3k vs 8.6k events/s at the default options). A thread keeps the relay's loop to itself, while still
 * sharing this machine's two cores, which the results state.
 */
export async function startBenchSqsEndpoint(): Promise<BenchSqsEndpoint> {
  const worker = new Worker(new URL("./sqsEndpointWorker.ts", import.meta.url));
  const url = await new Promise<string>((resolve, reject) => {
    worker.once("message", (message: { url: string }) => resolve(message.url));
    worker.once("error", reject);
  });
  let nextId = 0;
  const pending = new Map<number, (reply: EndpointReply) => void>();
  worker.on("message", (reply: EndpointReply) => {
    pending.get(reply.id)?.(reply);
    pending.delete(reply.id);
  });
  const call = (request: EndpointCommand) =>
    new Promise<EndpointReply>((resolve) => {
      const id = ++nextId;
      pending.set(id, resolve);
      worker.postMessage({ ...request, id });
    });
  return {
    url,
    async setLatency(ms) {
      await call({ kind: "latency", ms });
    },
    async takeDeliveries() {
      return (await call({ kind: "take" })).deliveries ?? [];
    },
    async cpuMs() {
      return (await call({ kind: "cpu" })).cpuMs ?? Number.NaN;
    },
    async watch() {
      await call({ kind: "watch" });
      return {
        async stop() {
          const { pauses } = await call({ kind: "unwatch" });
          if (pauses === undefined) throw new Error("the endpoint was not being watched");
          return pauses;
        },
      };
    },
    async close() {
      await worker.terminate();
    },
  };
}
