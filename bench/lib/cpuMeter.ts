import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import type pg from "pg";

/** CPU milliseconds used so far by each party of a measurement. */
export interface CpuReading {
  relay: number;
  endpoint: number;
  postgres: number;
}

export type CpuUse = CpuReading & { wallMs: number };

/** Linux's USER_HZ: /proc/<pid>/stat counts CPU time in these ticks (100 on every mainstream kernel). */
const TICKS_PER_SECOND = 100;

/**
 * Who burns the machine's CPU during a measurement: the relay (this thread), the SQS endpoint (its worker
 * thread) and Postgres (postmaster and all its children, from /proc; only for a local server). On a 2-core
 * machine they compete; these numbers turn "the relay is slow" into "X of the 2 cores went to Y".
 */
export class CpuMeter {
  readonly #postmasterPid: number | undefined;
  readonly #endpointCpuMs: () => Promise<number>;

  private constructor(postmasterPid: number | undefined, endpointCpuMs: () => Promise<number>) {
    this.#postmasterPid = postmasterPid;
    this.#endpointCpuMs = endpointCpuMs;
  }

  static async create(pool: pg.Pool, endpointCpuMs: () => Promise<number>): Promise<CpuMeter> {
    return new CpuMeter(await postmasterPid(pool), endpointCpuMs);
  }

  async read(): Promise<CpuReading & { at: number }> {
    const own = process.threadCpuUsage();
    return {
      at: performance.now(),
      relay: (own.user + own.system) / 1000,
      endpoint: await this.#endpointCpuMs(),
      postgres: this.#postmasterPid === undefined ? Number.NaN : await processTreeCpuMs(this.#postmasterPid),
    };
  }

  /** Runs `work` and returns what it cost, in CPU ms per party and wall ms. */
  async measure<T>(work: () => Promise<T>): Promise<{ result: T; cpu: CpuUse }> {
    const before = await this.read();
    const result = await work();
    const after = await this.read();
    return {
      result,
      cpu: {
        relay: after.relay - before.relay,
        endpoint: after.endpoint - before.endpoint,
        postgres: after.postgres - before.postgres,
        wallMs: after.at - before.at,
      },
    };
  }
}

async function postmasterPid(pool: pg.Pool): Promise<number | undefined> {
  try {
    const { rows } = await pool.query<{ setting: string }>(
      "select setting from pg_settings where name = 'data_directory'",
    );
    const dir = rows[0]?.setting;
    if (dir === undefined) return undefined;
    const pid = Number((await readFile(join(dir, "postmaster.pid"), "utf8")).split("\n")[0]);
    return Number.isInteger(pid) ? pid : undefined;
  } catch {
    return undefined; // a remote server (BENCH_DATABASE_URL): its CPU is not ours to read
  }
}

/**
 * CPU of the postmaster and everything it started: utime + stime of the live processes, plus the postmaster's
 * cutime + cstime, where the CPU of children that already exited (a pooled session closed, an autovacuum
 * worker done) ends up once they are reaped. Without it the total would drop when a backend exits.
 */
async function processTreeCpuMs(root: number): Promise<number> {
  let ticks = 0;
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => undefined);
    if (stat === undefined) continue;
    // Fields after the command name, which is in parentheses and may contain spaces: state, ppid, ...
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const pid = Number(entry);
    if (pid !== root && Number(fields[1]) !== root) continue;
    ticks += Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of stat)
    if (pid === root) ticks += Number(fields[13]) + Number(fields[14]); // cutime, cstime (16 and 17)
  }
  return (ticks * 1000) / TICKS_PER_SECOND;
}
