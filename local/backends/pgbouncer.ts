import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { freePort } from "./freePort.ts";

export interface LocalPooler {
  /** `postgres` database URL through the pooler (any database name of the server works the same way). */
  url: string;
  source: "pgbouncer";
  /** `pgbouncer --version`'s first line. */
  version: string;
  stop(): Promise<void>;
}

/** Where pgbouncer comes from: Debian's package on CI and on these machines. */
export const PGBOUNCER_INSTALL_HINT =
  "install it (Debian/Ubuntu: `apt-get install -y pgbouncer`; macOS: `brew install pgbouncer`)";

/**
 * pgbouncer in `pool_mode = transaction` in front of `serverUrl`: the local stand-in for RDS Proxy, which also
 * hands a server connection to a client for one transaction at a time. What a session would carry between two
 * transactions (SET, LISTEN, session advisory locks, named prepared statements) is lost or leaks into another
 * client's transactions, exactly as behind a production pooler; docs/deploy.md "RDS Proxy and pgbouncer" says
 * what this package does about each.
 *
 * Every client is logged in to the server as the URL's user (`auth_type = any`), whatever user it names: the
 * tests that check role grants connect directly. 50 server connections per database: tests hold up to a few
 * dozen transactions open at once (writers waiting on each other's locks), which a smaller pool would queue in
 * pgbouncer instead of in Postgres; idle server connections are still reused most-recent first, so clients
 * share them all the time. Not installed is an error that says how to install it, never a skipped test.
 */
export async function startPgbouncer(
  serverUrl: string,
  options: { poolSize?: number; log?: (line: string) => void } = {},
): Promise<LocalPooler> {
  const version = installedVersion();
  const server = new URL(serverUrl);
  const port = await freePort();
  // Readable by the user pgbouncer switches to when started as root (it refuses to run as root).
  const base = join(tmpdir(), "outbox-relay-pgbouncer");
  await mkdir(base, { recursive: true, mode: 0o755 });
  const dir = await mkdtemp(join(base, "run-"));
  const config = join(dir, "pgbouncer.ini");
  const connection = [
    `host=${server.hostname}`,
    `port=${server.port === "" ? 5432 : server.port}`,
    `user=${decodeURIComponent(server.username)}`,
    `password=${decodeURIComponent(server.password)}`,
  ].join(" ");
  await writeFile(
    config,
    [
      "[databases]",
      `* = ${connection}`,
      "[pgbouncer]",
      "listen_addr = 127.0.0.1",
      `listen_port = ${port}`,
      "unix_socket_dir =",
      "auth_type = any",
      "pool_mode = transaction",
      `default_pool_size = ${options.poolSize ?? 50}`,
      "max_client_conn = 1000",
      "max_db_connections = 0",
      // The LIFO default (server_round_robin = 0) hands the most recently used server connection to the next
      // client: what migrate.ts and notify.ts rely on to detect that they are behind a transaction pooler.
      "server_round_robin = 0",
      // The suite drops and recreates databases; a pooled connection to a dropped one must not be reused.
      "server_check_delay = 0",
      // node-postgres sends no startup parameter but application_name, which pgbouncer tracks itself.
      "ignore_startup_parameters = extra_float_digits",
      "admin_users = postgres",
      "",
    ].join("\n"),
    { mode: 0o644 },
  );
  const asRoot = process.getuid?.() === 0;
  const child = spawn("pgbouncer", [...(asRoot ? ["-u", "postgres"] : []), config], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const collect = (chunk: Buffer) => {
    output += chunk.toString();
    for (const line of chunk.toString().split("\n")) if (line !== "") options.log?.(line);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  const url = new URL(serverUrl);
  url.port = String(port);
  url.pathname = "/postgres";
  try {
    await waitUntilServing(url.toString(), child, () => output);
  } catch (error) {
    child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    url: url.toString(),
    source: "pgbouncer",
    version,
    stop: async () => {
      await stopChild(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function installedVersion(): string {
  try {
    return execFileSync("pgbouncer", ["--version"], { encoding: "utf8" }).split("\n")[0]?.trim() ?? "";
  } catch (error) {
    throw new Error(
      `pgbouncer is not installed (or not on PATH), and the transaction-pooler tests need it: ${PGBOUNCER_INSTALL_HINT}`,
      { cause: error },
    );
  }
}

/** Connects through the pooler until a query comes back (pgbouncer opens the server connection lazily). */
async function waitUntilServing(url: string, child: ChildProcess, output: () => string) {
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) {
      throw new Error(`pgbouncer exited with code ${child.exitCode}: ${output().trim()}`);
    }
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
    client.on("error", () => {});
    try {
      await client.connect();
      await client.query("select 1");
      return;
    } catch (error) {
      if (Date.now() > deadline) {
        throw new Error(
          `pgbouncer did not serve within 15 s: ${(error as Error).message}; ${output().trim()}`,
          {
            cause: error,
          },
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    } finally {
      await client.end().catch(() => {});
    }
  }
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    // SIGINT: "safe shutdown", waits for clients to finish; SIGTERM closes at once, which a test teardown wants.
    child.kill("SIGTERM");
  });
}
