import { Command, Option } from "commander";
import { DESTINATION_SETTINGS } from "../../functions/shared/destinations/setting.ts";
import { isQueueUrl } from "../../functions/shared/destinations/sqs/queueUrl.ts";
import {
  RELAY_SETTINGS,
  type RelayConfig,
  relayConfigFromEnv,
} from "../../functions/shared/relay/settings.ts";
import type { Env } from "../../functions/shared/util/env.ts";
import { CliError, EXIT_FAILURE, EXIT_USAGE } from "../errors.ts";
import { createLogger, defaultLogFormat, type LogFormat } from "../logger.ts";
import {
  addConnectionOptions,
  type ConnectionFlags,
  connectionEnv,
  envWithFlags,
  flagHelp,
  integerFlag,
  integerIn,
} from "../options.ts";
import { escapeControl, print, printJson } from "../output.ts";
import { type RelayTotals, relayLoop } from "../relayLoop.ts";

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
  retention?: string;
  invocationSeconds: number;
  logFormat?: LogFormat;
  json?: boolean;
}

const R = RELAY_SETTINGS;
const { queueUrl: queue, eventBusName: bus, eventSource: source, routes } = DESTINATION_SETTINGS;

export function relayCommand(): Command {
  return addConnectionOptions(new Command("relay"))
    .description(
      "Run the relay as a long-running process (local runs, containers, ECS): the Lambda's engine in a loop of " +
        "invocations. SIGTERM/SIGINT stop claiming; the round in progress finishes and records, no row stays locked.",
    )
    .option("--queue-url <url>", flagHelp(queue, "the SQS FIFO queue"))
    .option("--event-bus <name|arn>", flagHelp(bus, "publish to this EventBridge bus instead of a queue"))
    .option("--event-source <source>", flagHelp(source, "the events' source on the bus"))
    .option(
      "--endpoint-url <url>",
      "SQS or EventBridge endpoint, e.g. LocalStack or moto (env AWS_ENDPOINT_URL_SQS / " +
        "AWS_ENDPOINT_URL_EVENTBRIDGE, AWS_ENDPOINT_URL)",
    )
    .option(
      "--drain",
      `exit once nothing is claimable, instead of polling for new events (env ${R.mode.env}=drain)`,
    )
    .option("--batch-size <n>", flagHelp(R.batchSize), integerFlag(R.batchSize))
    .option("--concurrency <n>", flagHelp(R.concurrency), integerFlag(R.concurrency))
    .option("--max-attempts <n>", flagHelp(R.maxAttempts), integerFlag(R.maxAttempts))
    .option("--strict-order", flagHelp(R.strictOrder))
    .addOption(new Option("--retention <mode>", flagHelp(R.retention)).choices(R.retention.choices))
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
      // With a route table the queue is an optional default, checked with the routes by relayConfigFromEnv.
      if ((env[bus.env] ?? "").trim() === "" && (env[routes.env] ?? "").trim() === "") {
        checkQueueUrl(env[queue.env]);
      }
      const config = relayConfigFromEnv(env);
      const endpoint =
        flags.endpointUrl ??
        (config.destination.kind === "eventbridge"
          ? env.AWS_ENDPOINT_URL_EVENTBRIDGE
          : env.AWS_ENDPOINT_URL_SQS) ??
        env.AWS_ENDPOINT_URL;
      const invocationMs = flags.invocationSeconds * 1000;
      const logger = createLogger(flags.logFormat ?? defaultLogFormat());
      const totals = await relayLoop(config, { endpoint, invocationMs, logger });
      if (flags.json) printJson(totals);
      else print(describeTotals(totals));
      process.exitCode = exitCodeFor(config, totals);
    });
}

function relayEnv(flags: RelayFlags): Env {
  return envWithFlags(connectionEnv(flags), {
    [queue.env]: flags.queueUrl,
    [bus.env]: flags.eventBus,
    [source.env]: flags.eventSource,
    [R.mode.env]: flags.drain ? "drain" : undefined,
    [R.batchSize.env]: flags.batchSize?.toString(),
    [R.concurrency.env]: flags.concurrency?.toString(),
    [R.maxAttempts.env]: flags.maxAttempts?.toString(),
    [R.strictOrder.env]: flags.strictOrder ? "true" : undefined,
    [R.retention.env]: flags.retention,
  });
}

/** Says which flag or variable is wrong, rather than the engine's option name. */
function checkQueueUrl(queueUrl: string | undefined) {
  if (queueUrl === undefined || queueUrl.trim() === "") {
    throw new CliError(
      `no destination: pass --queue-url (or set ${queue.env}) or --event-bus (or set ${bus.env}), or set ` +
        `${routes.env} (docs/routing.md)`,
      EXIT_USAGE,
    );
  }
  if (!isQueueUrl(queueUrl.trim())) {
    throw new CliError(
      `--queue-url / ${queue.env} must be a queue URL like ` +
        `https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo, got ${JSON.stringify(queueUrl)}`,
      EXIT_USAGE,
    );
  }
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
