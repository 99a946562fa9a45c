/**
 * The relay as a long-running process: invocation after invocation of the Lambda's `relayInvocation`, each with
 * a deadline like the scheduled Lambda's. `outbox relay` runs it under its own signal handling; `outbox dev`
 * runs it beside the local AWS endpoint and the consumer, and stops it with its own signal.
 */
import { queryTimeoutFor } from "../functions/shared/db/connection.ts";
import { createDestination } from "../functions/shared/destinations/create.ts";
import { ConfigError, errorMessage } from "../functions/shared/outbox/errors.ts";
import type { RelaySummary } from "../functions/shared/relay/engine.ts";
import {
  destinationCheckOnce,
  destinationClientOptions,
  longestStatementMs,
  minimumInvocationMs,
  relayInvocation,
  relaySessions,
} from "../functions/shared/relay/invocation.ts";
import type { RelayConfig } from "../functions/shared/relay/settings.ts";
import type { Logger } from "../functions/shared/util/logger.ts";
import { openOutboxDatabase } from "./database.ts";

export interface RelayTotals {
  invocations: number;
  rounds: number;
  claimed: number;
  published: number;
  failed: number;
  deadLettered: number;
  failedRounds: number;
  stoppedBy: RelaySummary["stoppedBy"] | "drained";
  lastError?: string;
}

export interface LoopOptions {
  endpoint: string | undefined;
  invocationMs: number;
  logger: Logger;
  /**
   * Stops the loop (after the round in progress has recorded). Without it the loop handles SIGTERM/SIGINT and
   * an IPC disconnect itself, as `outbox relay` does.
   */
  signal?: AbortSignal;
  /** Called once the destination is created and the database answers, before the first invocation. */
  onStarted?(): void;
}

/**
 * Invocation after invocation of `relayInvocation`, each with a deadline like the scheduled Lambda's: the
 * Lambda's invocation itself (order-key check, LISTEN when RELAY_LISTEN is on, time-bounded rounds, the
 * no-progress verdict), a summary line per invocation. Stops on a signal (after the round in progress has
 * recorded) or, in drain mode, once nothing is claimable.
 */
export async function relayLoop(config: RelayConfig, options: LoopOptions): Promise<RelayTotals> {
  const { logger } = options;
  // An explicit endpoint: the SQS client would otherwise send to the QueueUrl's host rather than a configured
  // emulator or proxy endpoint.
  const { destination, destroy } = await createDestination(config.destination, {
    ...destinationClientOptions(config),
    ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
  });
  // The Lambda refuses a timeout that cannot fit one round (invocationDeadline); a process must too, by the same
  // rule, or it would start invocation after invocation that each end at once (the claim check's load allowance
  // is tens of seconds).
  const minimumMs = minimumInvocationMs(config, destination.maxMessageBytes);
  const budgetMs = Math.min(options.invocationMs, config.maxDurationMs ?? Number.POSITIVE_INFINITY);
  if (budgetMs < minimumMs) {
    destroy();
    throw new ConfigError(
      `an invocation of ${options.invocationMs} ms${config.maxDurationMs === undefined ? "" : ` (RELAY_MAX_DURATION_MS=${config.maxDurationMs})`} ` +
        `cannot fit one round, which reserves ${minimumMs} ms with RELAY_BUDGET_MARGIN_MS` +
        `${config.claimCheck === undefined ? "" : " and the claim check's load allowance"}: give it at least ${Math.ceil(minimumMs / 1000)} s`,
    );
  }
  const database = await openOutboxDatabase(
    { source: config.database, location: { schema: config.relay.schema, table: config.relay.table } },
    {
      maxConnections: relaySessions(config),
      queryTimeoutMs: queryTimeoutFor(longestStatementMs(config, destination.maxMessageBytes)),
    },
  ).catch((error: unknown) => {
    destroy();
    throw error;
  });
  const totals: RelayTotals = {
    invocations: 0,
    rounds: 0,
    claimed: 0,
    published: 0,
    failed: 0,
    deadLettered: 0,
    failedRounds: 0,
    stoppedBy: "drained",
  };
  const controller = new AbortController();
  const unhook =
    options.signal === undefined ? hookSignals(controller, logger) : followSignal(options.signal, controller);
  try {
    // A queue that does not exist, is not FIFO or takes smaller messages fails the first invocation, naming the
    // fix (a route table's check runs beside its first rounds: one silent route does not hold the others).
    const checkOnce = destinationCheckOnce(destination, logger, 15_000);
    logger.info("relay started", {
      destination: destination.kind,
      target: destination.target,
      table: database.names.qualified,
      mode: config.relay.mode,
      batchSize: config.relay.batchSize,
      invocationMs: options.invocationMs,
    });
    options.onStarted?.();
    while (!controller.signal.aborted) {
      const started = Date.now();
      const deadline = started + budgetMs;
      const { noProgress, ...summary } = await checkOnce(
        deadline,
        (signal) =>
          relayInvocation(
            { pool: database.pool, destination, deadline, logger, signal: signal ?? controller.signal },
            config,
          ),
        controller.signal,
      );
      addTo(totals, summary);
      logger.info("invocation finished", { ...summary });
      // Where the Lambda fails the invocation (and its alarm fires), a long-running process says so and goes on.
      if (noProgress !== undefined)
        logger.error("invocation made no progress", { error: noProgress.message });
      if (config.relay.mode === "drain" && summary.stoppedBy !== "deadline") break;
    }
  } finally {
    unhook();
    await database
      .close()
      .catch((error: unknown) => logger.warn("closing the pool failed", { error: errorMessage(error) }));
    destroy();
  }
  return totals;
}

/** SIGTERM/SIGINT stop claiming; a second one exits at once; a lost IPC parent counts as SIGTERM. */
function hookSignals(controller: AbortController, logger: Logger): () => void {
  const onSignal = (signal: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      // Postgres rolls the open round back when the connection closes; its rows are claimed again later.
      logger.warn("second signal: exiting without waiting for the round in progress", { signal });
      process.exit(130);
    }
    logger.info("stopping: no new rounds; the round in progress finishes and records", { signal });
    controller.abort();
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  // Started by a supervisor with an IPC channel (npm start does): if it goes away, stop as on SIGTERM.
  const onDisconnect = () => onSignal("SIGTERM");
  process.once("disconnect", onDisconnect);
  return () => {
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
    process.off("disconnect", onDisconnect);
  };
}

function followSignal(signal: AbortSignal, controller: AbortController): () => void {
  const abort = () => controller.abort();
  if (signal.aborted) abort();
  signal.addEventListener("abort", abort, { once: true });
  return () => signal.removeEventListener("abort", abort);
}

function addTo(totals: RelayTotals, summary: RelaySummary) {
  totals.invocations++;
  totals.rounds += summary.rounds;
  totals.claimed += summary.claimed;
  totals.published += summary.published;
  totals.failed += summary.failed;
  totals.deadLettered += summary.deadLettered;
  totals.failedRounds += summary.failedRounds;
  totals.stoppedBy = summary.stoppedBy;
  if (summary.lastError !== undefined) totals.lastError = summary.lastError;
}
