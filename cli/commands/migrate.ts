import { Command, Option } from "commander";
import { DEFAULT_INBOX_TABLE, inboxNames, migrateInbox } from "../../functions/shared/consumer/inboxTable.ts";
import { MIGRATE_SETTINGS, migrate } from "../../functions/shared/db/migrate.ts";
import { OUTBOX_LOCATION_SETTINGS, outboxNames } from "../../functions/shared/outbox/names.ts";
import { MIGRATE_QUERY_TIMEOUT_MS, openOutboxDatabase, outboxTargetFromEnv } from "../database.ts";
import { addConnectionOptions, type ConnectionFlags, connectionEnv, flagHelp } from "../options.ts";
import { print, printJson } from "../output.ts";

interface MigrateFlags extends ConnectionFlags {
  migrationsDir?: string;
  json?: boolean;
  /** `--inbox` alone is true (the default table); `--inbox <table>` names it. */
  inbox?: string | true;
}

export function migrateCommand(): Command {
  return addConnectionOptions(new Command("migrate"))
    .description(
      "Apply pending migrations (forward-only, under an advisory lock: safe to run from several places)",
    )
    .option(
      "--migrations-dir <dir>",
      `${flagHelp(MIGRATE_SETTINGS.migrationsDir, "folder of NNNN_name.sql files")}; default: the package's`,
    )
    .addOption(
      new Option(
        "--inbox [table]",
        "apply the consumer's inbox migrations instead of the outbox's, to the inbox table [table] " +
          `(default ${DEFAULT_INBOX_TABLE}) in --schema (default public; ${OUTBOX_LOCATION_SETTINGS.schema.env} ` +
          "names the outbox's schema and is not read), with a migrations ledger of its own",
      ).conflicts("table"),
    )
    .option("--json", "print the result as JSON")
    .action(async (flags: MigrateFlags) => {
      const target = outboxTargetFromEnv(connectionEnv(flags));
      // The inbox lives in a consumer's database, usually not the outbox's: OUTBOX_SCHEMA describes another
      // table's place, so only the flag says where the inbox goes.
      const names =
        flags.inbox === undefined
          ? outboxNames(target.location)
          : inboxNames({
              ...(flags.schema === undefined ? {} : { schema: flags.schema }),
              table: flags.inbox === true ? DEFAULT_INBOX_TABLE : flags.inbox,
            });
      const database = await openOutboxDatabase(target, {
        requireTable: false,
        queryTimeoutMs: flags.queryTimeoutMs ?? MIGRATE_QUERY_TIMEOUT_MS,
      });
      try {
        const options = {
          schema: names.schema,
          table: names.table,
          ...(flags.migrationsDir === undefined ? {} : { migrationsDir: flags.migrationsDir }),
        };
        const result =
          flags.inbox === undefined
            ? await migrate(database.pool, options)
            : await migrateInbox(database.pool, options);
        if (flags.json) return printJson(result);
        for (const name of result.applied) print(`applied          ${name}`);
        for (const name of result.alreadyApplied) print(`already applied  ${name}`);
        print(
          result.applied.length === 0
            ? `${names.qualified} is up to date`
            : `${names.qualified}: applied ${result.applied.length} migration(s)`,
        );
      } finally {
        await database.close();
      }
    });
}
