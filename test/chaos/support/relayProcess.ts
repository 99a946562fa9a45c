import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** What relayWorker.ts reports over IPC. */
export type WorkerMessage =
  | { type: "ready"; pid: number }
  | { type: "round"; claimed: number; published: number; failed: number }
  | { type: "roundFailed"; error: string }
  | { type: "invocation"; stoppedBy: string; published: number; ms: number }
  | { type: "hardTimeout" };

const WORKER = fileURLToPath(new URL("./relayWorker.ts", import.meta.url));
const READY_TIMEOUT_MS = 20_000;
const STOP_TIMEOUT_MS = 30_000;

/** Totals over every process a RelayFleet started, the killed ones included. */
export interface FleetStats {
  started: number;
  killed: number;
  rounds: number;
  published: number;
  /** Entries whose publish failed (each try of a row counts): survives the row in both retention modes. */
  failedEntries: number;
  failedRounds: number;
  invocations: number;
  invocationsByStop: Record<string, number>;
  /** Invocations Lambda would have killed at its timeout (the relay overran its own deadline). */
  hardTimeouts: number;
  lastErrors: string[];
}

/**
 * Relay child processes (relayWorker.ts) sharing one environment, the SQS endpoint in this process reached
 * over HTTP. `kill()` is SIGKILL, no goodbye: the round in flight dies with its transaction open.
 */
export class RelayFleet {
  readonly stats: FleetStats = {
    started: 0,
    killed: 0,
    rounds: 0,
    published: 0,
    failedEntries: 0,
    failedRounds: 0,
    invocations: 0,
    invocationsByStop: {},
    hardTimeouts: 0,
    lastErrors: [],
  };
  readonly #env: Record<string, string>;
  readonly #children = new Set<ChildProcess>();
  readonly #listeners = new Set<(message: WorkerMessage) => void>();
  #stderr = "";

  constructor(env: Record<string, string>) {
    this.#env = env;
  }

  get running(): number {
    return this.#children.size;
  }

  /** Every message from every child, as it arrives (for fault triggers that follow the relay's progress). */
  onMessage(listener: (message: WorkerMessage) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Starts one more relay process and waits until it is about to claim. */
  async start(): Promise<void> {
    const child = spawn(process.execPath, [WORKER], {
      env: { PATH: process.env.PATH ?? "", ...this.#env },
      stdio: ["ignore", "ignore", "pipe", "ipc"],
    });
    this.stats.started++;
    this.#children.add(child);
    child.stderr?.on("data", (chunk: Buffer) => {
      this.#stderr = (this.#stderr + chunk.toString()).slice(-8_000);
    });
    child.on("message", (message: WorkerMessage) => this.#record(message));
    child.once("exit", () => this.#children.delete(child));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`relay worker not ready after ${READY_TIMEOUT_MS} ms: ${this.#stderr}`)),
        READY_TIMEOUT_MS,
      );
      const ready = (message: WorkerMessage) => {
        if (message.type !== "ready") return;
        clearTimeout(timer);
        child.off("message", ready);
        resolve();
      };
      child.on("message", ready);
      child.once("exit", (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`relay worker exited before ready (${code ?? signal}): ${this.#stderr}`));
      });
    });
  }

  /** SIGKILLs one running relay (the oldest) and resolves once it is gone. */
  async killOne(): Promise<void> {
    const [child] = this.#children;
    if (child === undefined) throw new Error("no relay process to kill");
    this.stats.killed++;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
  }

  /** Asks every relay to stop after its round (as SIGTERM would) and waits for them; SIGKILLs stragglers. */
  async stopAll(): Promise<void> {
    await Promise.all(
      [...this.#children].map(async (child) => {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        if (child.connected) child.send("stop");
        const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
        await exited;
        clearTimeout(timer);
      }),
    );
  }

  /** The tail of the children's stderr, for failure messages. */
  get stderr(): string {
    return this.#stderr;
  }

  #record(message: WorkerMessage) {
    const s = this.stats;
    if (message.type === "round") {
      s.rounds++;
      s.published += message.published;
      s.failedEntries += message.failed;
    } else if (message.type === "roundFailed") {
      s.failedRounds++;
      s.lastErrors = [...s.lastErrors.slice(-4), message.error];
    } else if (message.type === "invocation") {
      s.invocations++;
      s.invocationsByStop[message.stoppedBy] = (s.invocationsByStop[message.stoppedBy] ?? 0) + 1;
    } else if (message.type === "hardTimeout") {
      s.hardTimeouts++;
    }
    for (const listener of this.#listeners) listener(message);
  }
}
