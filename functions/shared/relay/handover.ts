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
 * - hand-over: after its first completed round an invocation names itself the holder of its relay slot (one per
 *   schedule target) unless a later-started one holds it; about once a second each invocation reads the slot,
 *   and one that finds a later-started invocation there stops starting rounds and returns. A successor that dies
 *   before completing a round never takes the slot, so the current one keeps claiming; one that dies after leaves
 *   the slot to the next tick (relayTiming's schedule), which is at most one tick interval plus its jitter away.
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
  /** Stop after this long without a claimed row; undefined: never. */
  idleStopMs?: number;
  now?: () => number;
}

/** How often an invocation reads its slot: a hand-over costs at most this much overlap, plus one round. */
export const HANDOVER_CHECK_MS = 1_000;

export type EarlyStop = "handedOver" | "idle";

export class StopWatch {
  readonly #options: StopWatchOptions;
  readonly #controller = new AbortController();
  readonly #invocation: string;
  readonly #now: () => number;
  #reason: EarlyStop | undefined;
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
    if (report.claimed > 0) this.#lastClaimAt = this.#now();
    const handover = this.#options.handover;
    if (handover !== undefined && !this.#proved && this.#proving === undefined) {
      this.#proving = this.#prove(handover).finally(() => {
        this.#proving = undefined;
      });
    }
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
