import { createServer } from "node:net";
import { CliError, EXIT_USAGE } from "../errors.ts";

/**
 * Fails with a message naming `flag` when 127.0.0.1:`port` is taken, before anything is started: the servers
 * that would listen there report a taken port late (embedded Postgres exits without saying why).
 */
export async function requireFreePort(port: number, flag: string, what: string): Promise<void> {
  if (port === 0) return;
  const server = createServer();
  const taken = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    server.once("error", (error: NodeJS.ErrnoException) => resolve(error));
    server.listen(port, "127.0.0.1", () => resolve(undefined));
  });
  if (taken === undefined) {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    return;
  }
  throw new CliError(
    `${flag} ${port}: 127.0.0.1:${port} is ${taken.code === "EADDRINUSE" ? "already in use" : `not available (${taken.code})`} ` +
      `(for ${what}): stop what listens there, or pass another ${flag}`,
    EXIT_USAGE,
  );
}
