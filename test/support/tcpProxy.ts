import { type AddressInfo, createServer, Socket } from "node:net";

export interface StallingTcpProxy {
  /** The proxy's port on 127.0.0.1. */
  port: number;
  /** Connections opened through the proxy so far. */
  readonly connections: number;
  /**
   * From now on, bytes on the connections open now are dropped in both directions and nothing is closed: what
   * a client sees when a failover or a lost route leaves its socket open and silent. New connections still pass.
   */
  stall(): void;
  close(): Promise<void>;
}

/** A TCP proxy to `127.0.0.1:targetPort` that can go silent without closing (see `stall`). */
export async function startStallingTcpProxy(targetPort: number): Promise<StallingTcpProxy> {
  const open = new Set<{ client: Socket; upstream: Socket; stalled: boolean }>();
  let connections = 0;
  const server = createServer((client) => {
    connections++;
    const upstream = new Socket();
    const pair = { client, upstream, stalled: false };
    open.add(pair);
    upstream.connect(targetPort, "127.0.0.1");
    client.on("data", (chunk) => {
      if (!pair.stalled) upstream.write(chunk);
    });
    upstream.on("data", (chunk) => {
      if (!pair.stalled) client.write(chunk);
    });
    onEitherEnd(client, upstream, () => open.delete(pair));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    get connections() {
      return connections;
    },
    stall() {
      for (const pair of open) pair.stalled = true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const pair of open) {
          pair.client.destroy();
          pair.upstream.destroy();
        }
        server.close(() => resolve());
      }),
  };
}

export interface ThrottlingTcpProxy {
  /** The proxy's port on 127.0.0.1. */
  port: number;
  /**
   * Bytes per second the target's replies reach the clients at, on every connection (undefined: no limit):
   * what a session over a slow or congested path, or to an overloaded server, sees. Requests pass unthrottled.
   */
  throttle(bytesPerSecond: number | undefined): void;
  close(): Promise<void>;
}

/** Time slice of the throttle: each connection writes at most rate x slice per slice. */
const THROTTLE_SLICE_MS = 10;
/** Bytes a connection buffers from the target before it stops reading (TCP then pushes back on the server). */
const THROTTLE_BUFFER_BYTES = 256 * 1024;

/**
 * A TCP proxy to `127.0.0.1:targetPort` that paces what the target sends back. The server's writes block once
 * the proxy stops reading, so a statement that sends a large row runs as long as the pace makes it: a slow
 * session made deterministic, not left to the machine's load.
 */
export async function startThrottlingTcpProxy(targetPort: number): Promise<ThrottlingTcpProxy> {
  let rate: number | undefined;
  const open = new Set<{ client: Socket; upstream: Socket; timer: ReturnType<typeof setInterval> }>();
  const server = createServer((client) => {
    const upstream = new Socket();
    const queue: Buffer[] = [];
    let queued = 0;
    const flush = () => {
      let budget = rate === undefined ? Number.POSITIVE_INFINITY : (rate * THROTTLE_SLICE_MS) / 1000;
      while (budget > 0 && queue.length > 0) {
        const chunk = queue[0] as Buffer;
        const part = chunk.length <= budget ? chunk : chunk.subarray(0, Math.max(1, Math.floor(budget)));
        client.write(part);
        budget -= part.length;
        queued -= part.length;
        if (part.length === chunk.length) queue.shift();
        else queue[0] = chunk.subarray(part.length);
      }
      if (queued < THROTTLE_BUFFER_BYTES && upstream.isPaused()) upstream.resume();
    };
    const pair = { client, upstream, timer: setInterval(flush, THROTTLE_SLICE_MS) };
    open.add(pair);
    upstream.connect(targetPort, "127.0.0.1");
    client.on("data", (chunk) => upstream.write(chunk));
    upstream.on("data", (chunk) => {
      queue.push(chunk);
      queued += chunk.length;
      if (rate === undefined) flush();
      else if (queued >= THROTTLE_BUFFER_BYTES) upstream.pause();
    });
    onEitherEnd(client, upstream, () => {
      clearInterval(pair.timer);
      open.delete(pair);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    throttle(bytesPerSecond) {
      rate = bytesPerSecond;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const pair of open) {
          clearInterval(pair.timer);
          pair.client.destroy();
          pair.upstream.destroy();
        }
        server.close(() => resolve());
      }),
  };
}

/** When either side of a proxied pair closes or fails: `forget` it, then close both. */
function onEitherEnd(client: Socket, upstream: Socket, forget: () => void): void {
  const end = () => {
    forget();
    client.destroy();
    upstream.destroy();
  };
  for (const socket of [client, upstream]) {
    socket.on("close", end);
    socket.on("error", end);
  }
}
