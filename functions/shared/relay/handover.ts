import { randomUUID } from "node:crypto";
import { type SessionPool, withTransaction } from "../db/session.ts";
import { errorMessage } from "../outbox/errors.ts";
import type { OutboxNames } from "../outbox/names.ts";
import type { Logger } from "../util/logger.ts";
import type { RoundReport } from "./engine.ts";
import { claimHandoverSlot } from "./sql/claimHandoverSlot.ts";
import { handoverSlotHolder } from "./sql/handoverSlotHolder.ts";

/**
 * When a dwelling invocation stops before its budget ends (docs/relay.md, "Hand-over between invocations"):
 *
 * - hand-over: once an invocation has been claiming for the proving period (RELAY_HANDOVER_PROVING_MS: rounds
 *   completing from its first one for that long, no round failing in between) it names itself the holder of its
 *   relay slot (one per schedule target), unless a later-started one holds it; about once a second each
 *   invocation reads the slot, and one that finds a later-started invocation there stops starting rounds and
 *   returns. A successor that dies before it proved itself never takes the slot, so the current one keeps
 *   claiming; one that dies after leaves the slot to the next tick (relayTiming's schedule), which is at most one
 *   tick interval plus its jitter away. The period is what a hand-over costs: each tick's overlap grows by it.
 * - idle stop (RELAY_IDLE_STOP_MS): an invocation that claimed nothing for that long returns; the next tick
 *   resumes.
 *
 * Neither touches what is claimed or in what order: the claim's FOR UPDATE SKIP LOCKED and per-group head rule
 * hold whichever invocation runs the round. A failed read or write of the slot is logged and changes nothing: the
 * invocation keeps dwelling, as it did before hand-overs existed.
 */
export interface HandoverOptions {
  /** The invocation's relay slot: its schedule target's index (0 .. relays - 1). */
  slot: number;
  /** When the invocation started (epoch ms): a later start takes the slot over. */
  startedAt: number;
  /** Unique per invocation; default a random UUID. */
  invocation?: string;
}

export interface StopWatchOptions {
  pool: SessionPool;
  names: OutboxNames;
  statementTimeoutMs: number;
  logger?: Logger;
  handover?: HandoverOptions;
  /** How long the invocation claims, without a failed round, before it takes its slot; default HANDOVER_PROVING_MS. */
  provingMs?: number;
  /** Stop after this long without a claimed row; undefined: never. */
  idleStopMs?: number;
  now?: () => number;
}

/** How often an invocation reads its slot: a hand-over costs at most this much overlap, plus one round. */
export const HANDOVER_CHECK_MS = 1_000;

/**
 * RELAY_HANDOVER_PROVING_MS's default. A successor that dies in its first seconds (its first batch too large
 * for its memory, a connection that breaks after the first round) would otherwise leave its slot without a
 * relay until the next tick: up to 2 x the interval (120 s on a 1-minute schedule). Its cost: each hand-over's
 * overlap grows by the period, so the mean number of invocations alive by period / interval (5 / 60 = 0.08).
 */
export const HANDOVER_PROVING_MS = 5_000;

/**
 * What relayTiming's dwell cap allows a successor to start before its first round claims: a Lambda cold start
 * (init, the secret, the pool's first connection, the order-key check). With it the latest tick after an early
 * one still finds its predecessor claiming. Lambda allows an init phase up to 10 s; a start slower than this
 * leaves the rest of it without a relay claiming (the next tick's invocation is the safety net then).
 */
export const HANDOVER_STARTUP_MS = 5_000;

export type EarlyStop = "handedOver" | "idle";

export class StopWatch {
  readonly #options: StopWatchOptions;
  readonly #controller = new AbortController();
  readonly #invocation: string;
  readonly #now: () => number;
  #reason: EarlyStop | undefined;
  /** When the current run of completed rounds began (no failure since); undefined before the first. */
  #claimingSince: number | undefined;
  #proved = false;
  #proving: Promise<void> | undefined;
  #checking: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #lastClaimAt: number;

  constructor(options: StopWatchOptions) {
    this.#options = options;
    this.#invocation = options.handover?.invocation ?? randomUUID();
    this.#now = options.now ?? Date.now;
    this.#lastClaimAt = this.#now();
    if (options.handover !== undefined || options.idleStopMs !== undefined) {
      const every = Math.min(HANDOVER_CHECK_MS, options.idleStopMs ?? HANDOVER_CHECK_MS);
      this.#timer = setInterval(() => this.#tick(), every);
      this.#timer.unref();
    }
  }

  /** Aborts when the invocation should stop starting rounds; rounds in flight finish. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Why it stopped early, if it did. */
  get reason(): EarlyStop | undefined {
    return this.#reason;
  }

  /** Called after every completed round. */
  onRound(report: RoundReport): void {
    const now = this.#now();
    if (report.claimed > 0) this.#lastClaimAt = now;
    this.#claimingSince ??= now;
    const handover = this.#options.handover;
    const provingMs = this.#options.provingMs ?? HANDOVER_PROVING_MS;
    if (
      handover !== undefined &&
      !this.#proved &&
      this.#proving === undefined &&
      now - this.#claimingSince >= provingMs
    ) {
      this.#proving = this.#prove(handover).finally(() => {
        this.#proving = undefined;
      });
    }
  }

  /** Called after every failed round: the proving period starts again at the next completed one. */
  onRoundFailed(): void {
    this.#claimingSince = undefined;
  }

  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    await Promise.all([this.#proving, this.#checking]);
  }

  #stop(reason: EarlyStop) {
    if (this.#reason !== undefined) return;
    this.#reason = reason;
    this.#options.logger?.info(
      reason === "handedOver"
        ? "a later invocation holds this relay slot; handing over"
        : "nothing claimed for the idle stop time; stopping until the next tick",
      { slot: this.#options.handover?.slot, idleStopMs: this.#options.idleStopMs },
    );
    this.#controller.abort();
  }

  #tick() {
    const { idleStopMs } = this.#options;
    if (idleStopMs !== undefined && this.#now() - this.#lastClaimAt >= idleStopMs) this.#stop("idle");
    const handover = this.#options.handover;
    if (handover !== undefined && this.#checking === undefined && this.#reason === undefined) {
      this.#checking = this.#check(handover).finally(() => {
        this.#checking = undefined;
      });
    }
  }

  async #prove(handover: HandoverOptions) {
    try {
      await this.#transaction((client) =>
        claimHandoverSlot(client, this.#options.names, {
          slot: handover.slot,
          invocation: this.#invocation,
          startedAt: handover.startedAt,
        }),
      );
      this.#proved = true;
    } catch (error) {
      // The next round tries again; until then the slot's holder keeps dwelling, as does this one.
      this.#options.logger?.warn("could not record this relay invocation in its slot", {
        error: errorMessage(error),
      });
    }
  }

  async #check(handover: HandoverOptions) {
    try {
      const holder = await this.#transaction((client) =>
        handoverSlotHolder(client, this.#options.names, handover.slot),
      );
      if (
        holder !== undefined &&
        holder.invocation !== this.#invocation &&
        holder.startedAt > handover.startedAt
      ) {
        this.#stop("handedOver");
      }
    } catch (error) {
      // Unknown is not a hand-over: keep dwelling.
      this.#options.logger?.warn("could not read this relay's slot; dwelling on", {
        error: errorMessage(error),
      });
    }
  }

  #transaction<T>(work: (client: Parameters<Parameters<typeof withTransaction>[1]>[0]) => Promise<T>) {
    return withTransaction(this.#options.pool, work, {
      statementTimeoutMs: this.#options.statementTimeoutMs,
      lockTimeoutMs: this.#options.statementTimeoutMs,
    });
  }
}

/** The schedule's input per target (infra/schedules.ts): which relay slot this invocation dwells in. */
export interface RelayTick {
  relaySlot: number;
}

/** A tick without a slot (a hand-started invocation, an older rule) dwells in slot 0. */
export function relaySlotOf(event: object): number {
  const slot = (event as Partial<RelayTick>).relaySlot;
  return Number.isInteger(slot) && (slot as number) >= 0 && (slot as number) < 32 ? (slot as number) : 0;
}
