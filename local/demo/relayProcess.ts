/**
 * Runs the relay for `npm start` as its own process, `outbox relay` (cli/outbox.ts): the Lambda's engine
 * (`runRelay`, dwell mode) invoked again and again with a deadline, as the EventBridge schedule would.
 * A separate process so that chaos can kill it for real (SIGKILL: no cleanup, no final commit), exactly like
 * a Lambda timeout or a lost container; if it exits on its own, it is started again, as the next scheduled
 * invocation would be.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, type WriteStream } from "node:fs";
import { fileURLToPath } from "node:url";

const CLI = fileURLToPath(new URL("../../cli/outbox.ts", import.meta.url));
/** Like the next schedule tick, but without making a demo wait a minute. */
const RESTART_DELAY_MS = 1_000;

export interface RelayLogLine {
  level?: string;
  message?: string;
  [field: string]: unknown;
}

export interface RelayProcessOptions {
  env: Record<string, string | undefined>;
  invocationSeconds: number;
  /** Every line the relay logs is appended here (JSON lines). */
  logFile: string;
  onLog?(line: RelayLogLine): void;
  onStart?(pid: number | undefined, start: number): void;
  onExit?(code: number | null, signal: NodeJS.Signals | null, willRestart: boolean): void;
}

export class RelayProcess {
  starts = 0;
  kills = 0;
  readonly #options: RelayProcessOptions;
  readonly #log: WriteStream;
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #stopping = false;
  #restartTimer: NodeJS.Timeout | undefined;

  constructor(options: RelayProcessOptions) {
    this.#options = options;
    this.#log = createWriteStream(options.logFile, { flags: "a" });
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  start(): void {
    this.#restartTimer = undefined;
    if (this.#stopping) return;
    const child = spawn(
      process.execPath,
      [CLI, "relay", "--log-format", "json", "--invocation-seconds", String(this.#options.invocationSeconds)],
      // Its own process group, so the terminal's Ctrl-C reaches only this demo, which then stops the relay when
      // it is time (after the drain); the IPC channel lets the relay notice if this process dies unannounced.
      { env: this.#options.env, stdio: ["ignore", "pipe", "pipe", "ipc"], detached: true },
    );
    this.starts++;
    this.#child = child;
    this.#options.onStart?.(child.pid, this.starts);
    let buffered = "";
    const onData = (chunk: Buffer) => {
      this.#log.write(chunk);
      buffered += chunk.toString();
      const lines = buffered.split("\n");
      buffered = lines.pop() ?? "";
      for (const line of lines) this.#options.onLog?.(parseLogLine(line));
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    this.#exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => {
        if (this.#child === child) this.#child = undefined;
        const willRestart = !this.#stopping;
        this.#options.onExit?.(code, signal, willRestart);
        if (willRestart) this.#restartTimer = setTimeout(() => this.start(), RESTART_DELAY_MS);
        resolve();
      });
    });
  }

  /**
   * SIGKILL: the relay gets no chance to finish its round or commit; resolves once it is gone. It is started
   * again after a second, like the next scheduled invocation.
   */
  async kill(): Promise<void> {
    const child = this.#child;
    if (child === undefined) return;
    this.kills++;
    child.kill("SIGKILL");
    await this.#exited;
  }

  /** SIGTERM: the relay stops claiming, lets the round in progress record, and exits. */
  async stop(): Promise<void> {
    this.#stopping = true;
    clearTimeout(this.#restartTimer);
    this.#child?.kill("SIGTERM");
    await this.#exited;
    if (!this.#log.writableEnded) await new Promise<void>((resolve) => this.#log.end(resolve));
  }

  /** Last resort on a forced exit: nothing may outlive the demo. */
  killNow(): void {
    this.#stopping = true;
    clearTimeout(this.#restartTimer);
    this.#child?.kill("SIGKILL");
  }
}

function parseLogLine(line: string): RelayLogLine {
  try {
    return JSON.parse(line) as RelayLogLine;
  } catch {
    return { level: "INFO", message: line };
  }
}
