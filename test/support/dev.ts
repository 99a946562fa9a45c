import { type ChildProcess, spawn } from "node:child_process";

/** `outbox dev` running as a child process, its output collected; `stop()` sends SIGINT and returns the exit. */
export interface DevProcess {
  child: ChildProcess;
  output(): string;
  /** Resolves with the output once `pattern` appears in it; rejects when the process exits first or time runs out. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** The environment of a fresh shell: nothing of this run's database, AWS or relay settings. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!/^(DATABASE_|OUTBOX_|RELAY_|PURGE_|AWS_|TEST_|VITEST|NODE_OPTIONS$)/.test(name)) env[name] = value;
  }
  return { ...env, ...extra };
}

/**
 * `processGroup`: the command leads a process group of its own and stop() sends SIGINT to the whole group, as a
 * terminal's Ctrl-C does (npx does not pass a SIGINT sent to it alone on to the command it runs).
 */
export function spawnDev(
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; processGroup?: boolean },
): DevProcess {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: options.processGroup === true,
  });
  let output = "";
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    for (const listener of listeners) listener();
  };
  child.stdout?.on("data", onData);
  child.stderr?.on("data", onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("close", (code, signal) => resolve({ code, signal })),
  );
  const waitFor = (pattern: RegExp, timeoutMs = 60_000) =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        if (!pattern.test(output)) return;
        done();
        resolve(output);
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no ${pattern} within ${timeoutMs} ms; output:\n${output}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        listeners.delete(check);
      };
      listeners.add(check);
      void exited.then(() => {
        if (!listeners.has(check)) return;
        done();
        reject(new Error(`outbox dev exited before ${pattern}; output:\n${output}`));
      });
      check();
    });
  return {
    child,
    output: () => output,
    waitFor,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        if (options.processGroup === true) process.kill(-(child.pid as number), "SIGINT");
        else child.kill("SIGINT");
      }
      return exited;
    },
  };
}

/** Whether a process with this pid exists (signal 0 checks without signalling). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The first line of `outbox dev`'s printed environment that sets `name`. */
export function printedValue(output: string, name: string): string {
  const value = new RegExp(`^\\s*${name}=(.+)$`, "m").exec(output)?.[1];
  if (value === undefined) throw new Error(`outbox dev printed no ${name}:\n${output}`);
  return value.trim();
}
