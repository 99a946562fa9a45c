import { Command, CommanderError } from "commander";
import { DATABASE_SETTINGS } from "../functions/shared/db/settings.ts";
import { DESTINATION_SETTINGS } from "../functions/shared/destinations/setting.ts";
import { OUTBOX_LOCATION_SETTINGS } from "../functions/shared/outbox/names.ts";
import { deadLettersCommand } from "./commands/deadLetters.ts";
import { devCommand } from "./commands/dev.ts";
import { migrateCommand } from "./commands/migrate.ts";
import { purgeCommand } from "./commands/purge.ts";
import { redriveCommand } from "./commands/redrive.ts";
import { relayCommand } from "./commands/relay.ts";
import { statusCommand } from "./commands/status.ts";
import { describeError, EXIT_USAGE, verboseDetails } from "./errors.ts";
import { printError } from "./output.ts";

export function buildProgram(): Command {
  const program = new Command("outbox")
    .description(
      "Operate a transactional outbox (Postgres outbox_events -> SQS FIFO). Configured by flags or by the " +
        `Lambdas' environment variables (${DATABASE_SETTINGS.url.env} / ${DATABASE_SETTINGS.secretArn.env}, ` +
        `${DESTINATION_SETTINGS.queueUrl.env}, ${OUTBOX_LOCATION_SETTINGS.schema.env}, ` +
        `${OUTBOX_LOCATION_SETTINGS.table.env}, RELAY_*, PURGE_*).`,
    )
    .showHelpAfterError("(add --help for usage)")
    .exitOverride();
  for (const command of [
    migrateCommand(),
    relayCommand(),
    statusCommand(),
    deadLettersCommand(),
    redriveCommand(),
    purgeCommand(),
    devCommand(),
  ]) {
    // Subcommands throw instead of exiting, so runCli decides the exit code and cleanup runs.
    program.addCommand(command.exitOverride().showHelpAfterError("(add --help for usage)"));
  }
  return program;
}

/**
 * Runs one command and returns the exit code: 0 success, 1 the command failed, 2 usage or configuration.
 * Errors print as one line; --verbose adds the stack and causes.
 */
export async function runCli(argv: readonly string[]): Promise<number> {
  process.exitCode = 0;
  try {
    await buildProgram().parseAsync([...argv]);
    return Number(process.exitCode ?? 0);
  } catch (error) {
    if (error instanceof CommanderError) {
      // commander has already printed its message (or the help); only the exit code is left to decide.
      return error.exitCode === 0 ? 0 : EXIT_USAGE;
    }
    const described = describeError(error);
    printError(`outbox: ${described.message}`);
    if (argv.includes("--verbose")) printError(verboseDetails(error));
    return described.exitCode;
  }
}
