import { type ChildProcess, spawn } from "node:child_process";
import type { Env } from "../../functions/shared/util/env.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import type { TestDatabase } from "./db.ts";

/**
 * `outbox` (cli/outbox.ts) as a user runs it, against a test file's database: the CLI's tests
 * (test/cli/cli*.test.ts, one file per group of commands so that each file, and the pooler run of them, is short).
 */

const CLI = new URL("../../cli/outbox.ts", import.meta.url).pathname;

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function cliOf(db: TestDatabase) {
  /** The environment a user would have: none of this machine's outbox, database or AWS settings leak in. */
  function cliEnv(overrides: Env = {}): Env {
    const env: Env = {};
    for (const [name, value] of Object.entries(process.env)) {
      if (!/^(DATABASE_|OUTBOX_|RELAY_|PURGE_|AWS_|TEST_)/.test(name)) env[name] = value;
    }
    return {
      ...env,
      DATABASE_URL: db.url,
      AWS_REGION: LOCAL_AWS.region,
      AWS_ACCESS_KEY_ID: LOCAL_AWS.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: LOCAL_AWS.credentials.secretAccessKey,
      ...overrides,
    };
  }

  function startCli(args: string[], env: Env = {}): ChildProcess {
    return spawn(process.execPath, [CLI, ...args], { env: cliEnv(env), stdio: ["ignore", "pipe", "pipe"] });
  }

  function outbox(args: string[], env: Env = {}): Promise<CliRun> {
    return finished(startCli(args, env));
  }

  async function insertDeadLetter(row: { eventType?: string; aggregateId?: string; attempts?: number }) {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, attempts, last_error, dead_lettered_at)
       values ('order', $1, $2, '{"n": 1}', $3, 'SQS rejected the message: InvalidParameterValue: no', now())
       returning id`,
      [row.aggregateId ?? "order-1", row.eventType ?? "order.created", row.attempts ?? 10],
    );
    return rows[0]?.id as string;
  }

  async function rowState(id: string) {
    const { rows } = await db.pool.query(
      `select attempts, last_error, dead_lettered_at, processed_at, available_at <= now() as available
       from outbox_events where id = $1`,
      [id],
    );
    return rows[0];
  }

  return { startCli, outbox, insertDeadLetter, rowState };
}

/** What a CLI process printed, and its exit code, once it has closed. */
export function finished(child: ChildProcess): Promise<CliRun> {
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk) => {
    stdout += chunk;
  });
  child.stderr?.on("data", (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}
