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
    const end = () => {
      open.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("close", end);
    upstream.on("close", end);
    client.on("error", end);
    upstream.on("error", end);
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
