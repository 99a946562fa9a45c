import { Command, Option } from "commander";
import { queryTimeoutFor } from "../../functions/shared/db/connection.ts";
import { createDestination } from "../../functions/shared/destinations/create.ts";
import { errorMessage } from "../../functions/shared/outbox/errors.ts";
import {
  DEFAULT_RELAY_OPTIONS,
  type RelaySummary,
  roundReserveMs,
} from "../../functions/shared/relay/engine.ts";
import {
  checkDestination,
  destinationClientOptions,
  relayInvocation,
  relaySessions,
} from "../../functions/shared/relay/invocation.ts";
import { type RelayConfig, relayConfigFromEnv } from "../../functions/shared/relay/settings.ts";
import { openOutboxDatabase } from "../database.ts";
import { CliError, EXIT_FAILURE, EXIT_USAGE } from "../errors.ts";
import { createLogger, defaultLogFormat, type LogFormat } from "../logger.ts";
import {
  addConnectionOptions,
  type ConnectionFlags,
  connectionEnv,
  type Env,
  envWithFlags,
  integerIn,
} from "../options.ts";
import { escapeControl, print, printJson } from "../output.ts";

interface RelayFlags extends ConnectionFlags {
  queueUrl?: string;
  eventBus?: string;
  eventSource?: string;
  endpointUrl?: string;
  drain?: boolean;
  batchSize?: number;
  concurrency?: number;
  maxAttempts?: number;
  strictOrder?: boolean;
  invocationSeconds: number;
  logFormat?: LogFormat;
  json?: boolean;
}

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

export function relayCommand(): Command {
  return addConnectionOptions(new Command("relay"))
    .description(
      "Run the relay as a long-running process (local runs, containers, ECS): the Lambda's engine in a loop of " +
        "invocations. SIGTERM/SIGINT stop claiming; the round in progress finishes and records, no row stays locked.",
    )
    .option("--queue-url <url>", "the SQS FIFO queue (env OUTBOX_QUEUE_URL)")
    .option(
      "--event-bus <name|arn>",
      "publish to this EventBridge bus instead of a queue (env OUTBOX_EVENT_BUS_NAME)",
    )
    .option(
      "--event-source <source>",
      "the events' source on the bus (env OUTBOX_EVENT_SOURCE, default outbox-relay)",
    )
    .option(
      "--endpoint-url <url>",
      "SQS or EventBridge endpoint, e.g. LocalStack or moto (env AWS_ENDPOINT_URL_SQS / " +
        "AWS_ENDPOINT_URL_EVENTBRIDGE, AWS_ENDPOINT_URL)",
    )
    .option(
      "--drain",
      "exit once nothing is claimable, instead of polling for new events (env RELAY_MODE=drain)",
    )
    .option(
      "--batch-size <n>",
      `rows claimed per round (env RELAY_BATCH_SIZE, default ${DEFAULT_RELAY_OPTIONS.batchSize})`,
      integerIn(1, 1000),
    )
    .option(
      "--concurrency <n>",
      `SendMessageBatch / PutEvents requests in flight per round (env RELAY_CONCURRENCY, default ${DEFAULT_RELAY_OPTIONS.concurrency})`,
      integerIn(1, 100),
    )
    .option(
      "--max-attempts <n>",
      `rejected tries before a dead letter (env RELAY_MAX_ATTEMPTS, default ${DEFAULT_RELAY_OPTIONS.maxAttempts})`,
      integerIn(1, 1000),
    )
    .option("--strict-order", "a dead letter blocks the rest of its aggregate (env RELAY_STRICT_ORDER)")
    .option(
      "--invocation-seconds <n>",
      "length of one relay invocation (as the scheduled Lambda's time budget); the next starts at once",
      integerIn(30, 900),
      60,
    )
    .addOption(
      new Option(
        "--log-format <format>",
        "log lines on stderr (default: text on a terminal, else json)",
      ).choices(["text", "json"]),
    )
    .option("--json", "print the final summary as JSON")
    .action(async (flags: RelayFlags) => {
      const env = relayEnv(flags);
      if (env.OUTBOX_EVENT_BUS_NAME === undefined || env.OUTBOX_EVENT_BUS_NAME.trim() === "") {
        checkQueueUrl(env.OUTBOX_QUEUE_URL);
      }
      const config = relayConfigFromEnv(env);
      const endpoint =
        flags.endpointUrl ??
        (config.destination.kind === "eventbridge"
          ? env.AWS_ENDPOINT_URL_EVENTBRIDGE
          : env.AWS_ENDPOINT_URL_SQS) ??
        env.AWS_ENDPOINT_URL;
      const invocationMs = flags.invocationSeconds * 1000;
      const reserveMs = roundReserveMs(config.relay);
      if (invocationMs < reserveMs + 5_000) {
        throw new CliError(
          `--invocation-seconds ${flags.invocationSeconds} leaves no time for a round: one round reserves ` +
            `${reserveMs} ms (RELAY_PUBLISH_TIMEOUT_MS + 3 x RELAY_STATEMENT_TIMEOUT_MS)`,
          EXIT_USAGE,
        );
      }
      const logger = createLogger(flags.logFormat ?? defaultLogFormat());
      const totals = await relayLoop(config, { endpoint, invocationMs, logger });
      if (flags.json) printJson(totals);
      else print(describeTotals(totals));
      process.exitCode = exitCodeFor(config, totals);
    });
}

function relayEnv(flags: RelayFlags): Env {
  return envWithFlags(connectionEnv(flags), {
    OUTBOX_QUEUE_URL: flags.queueUrl,
    OUTBOX_EVENT_BUS_NAME: flags.eventBus,
    OUTBOX_EVENT_SOURCE: flags.eventSource,
    RELAY_MODE: flags.drain ? "drain" : undefined,
    RELAY_BATCH_SIZE: flags.batchSize?.toString(),
    RELAY_CONCURRENCY: flags.concurrency?.toString(),
    RELAY_MAX_ATTEMPTS: flags.maxAttempts?.toString(),
    RELAY_STRICT_ORDER: flags.strictOrder ? "true" : undefined,
  });
}

/** Says which flag or variable is wrong, rather than the engine's option name. */
function checkQueueUrl(queueUrl: string | undefined) {
  if (queueUrl === undefined || queueUrl.trim() === "") {
    throw new CliError(
      "no destination: pass --queue-url (or set OUTBOX_QUEUE_URL) or --event-bus (or set OUTBOX_EVENT_BUS_NAME)",
      EXIT_USAGE,
    );
  }
  if (!/^https?:\/\/[^/\s]+\/\S+$/.test(queueUrl.trim())) {
    throw new CliError(
      `--queue-url / OUTBOX_QUEUE_URL must be a queue URL like ` +
        `https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo, got ${JSON.stringify(queueUrl)}`,
      EXIT_USAGE,
    );
  }
}

interface LoopOptions {
  endpoint: string | undefined;
  invocationMs: number;
  logger: ReturnType<typeof createLogger>;
}

/**
 * Invocation after invocation of `relayInvocation`, each with a deadline like the scheduled Lambda's: the
 * Lambda's invocation itself (order-key check, LISTEN when RELAY_LISTEN is on, time-bounded rounds, the
 * no-progress verdict), a summary line per invocation. Stops on a signal (after the round in progress has
 * recorded) or, in drain mode, once nothing is claimable.
 */
async function relayLoop(config: RelayConfig, options: LoopOptions): Promise<RelayTotals> {
  const { logger } = options;
  // An explicit endpoint: the SQS client would otherwise send to the QueueUrl's host rather than a configured
  // emulator or proxy endpoint.
  const { destination, destroy } = createDestination(config.destination, {
    ...destinationClientOptions(config),
    ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
  });
  const database = await openOutboxDatabase(
    { source: config.database, location: { schema: config.relay.schema, table: config.relay.table } },
    {
      maxConnections: relaySessions(config),
      queryTimeoutMs: queryTimeoutFor(config.relay.statementTimeoutMs),
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
  try {
    // A queue that does not exist, is not FIFO or takes smaller messages fails here, naming the fix.
    await checkDestination(destination, logger, 15_000);
    logger.info("relay started", {
      destination: destination.kind,
      target: destination.target,
      table: database.names.qualified,
      mode: config.relay.mode,
      batchSize: config.relay.batchSize,
      invocationMs: options.invocationMs,
    });
    while (!controller.signal.aborted) {
      const started = Date.now();
      const deadline =
        started + Math.min(options.invocationMs, config.maxDurationMs ?? Number.POSITIVE_INFINITY);
      const { noProgress, ...summary } = await relayInvocation(
        { pool: database.pool, destination, deadline, logger, signal: controller.signal },
        config,
      );
      addTo(totals, summary);
      logger.info("invocation finished", { ...summary });
      // Where the Lambda fails the invocation (and its alarm fires), a long-running process says so and goes on.
      if (noProgress !== undefined)
        logger.error("invocation made no progress", { error: noProgress.message });
      if (config.relay.mode === "drain" && summary.stoppedBy !== "deadline") break;
    }
  } finally {
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
    process.off("disconnect", onDisconnect);
    await database
      .close()
      .catch((error: unknown) => logger.warn("closing the pool failed", { error: errorMessage(error) }));
    destroy();
  }
  return totals;
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

/** A drain that left events unpublished (failures now in backoff, dead letters, database errors) exits 1. */
function exitCodeFor(config: RelayConfig, totals: RelayTotals): number {
  if (config.relay.mode !== "drain") return 0;
  return totals.failed > 0 || totals.stoppedBy === "errors" ? EXIT_FAILURE : 0;
}

function describeTotals(totals: RelayTotals): string {
  const lines = [
    `relay stopped (${totals.stoppedBy}): published ${totals.published}, failed ${totals.failed}, ` +
      `dead-lettered ${totals.deadLettered} in ${totals.rounds} round(s), ${totals.invocations} invocation(s)`,
  ];
  if (totals.failedRounds > 0) {
    lines.push(
      `${totals.failedRounds} round(s) failed as a whole; last error: ${escapeControl(totals.lastError ?? "unknown")}`,
    );
  }
  return lines.join("\n");
}
