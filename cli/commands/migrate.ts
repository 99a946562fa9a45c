import { Command } from "commander";
import { MIGRATE_SETTINGS, migrate } from "../../functions/shared/db/migrate.ts";
import { MIGRATE_QUERY_TIMEOUT_MS, openOutboxDatabase, outboxTargetFromEnv } from "../database.ts";
import { addConnectionOptions, type ConnectionFlags, connectionEnv, flagHelp } from "../options.ts";
import { print, printJson } from "../output.ts";

interface MigrateFlags extends ConnectionFlags {
  migrationsDir?: string;
  json?: boolean;
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
    .option("--json", "print the result as JSON")
    .action(async (flags: MigrateFlags) => {
      const env = connectionEnv(flags);
      const database = await openOutboxDatabase(outboxTargetFromEnv(env), {
        requireTable: false,
        queryTimeoutMs: flags.queryTimeoutMs ?? MIGRATE_QUERY_TIMEOUT_MS,
      });
      try {
        const result = await migrate(database.pool, {
          schema: database.names.schema,
          table: database.names.table,
          ...(flags.migrationsDir === undefined ? {} : { migrationsDir: flags.migrationsDir }),
        });
        if (flags.json) return printJson(result);
        for (const name of result.applied) print(`applied          ${name}`);
        for (const name of result.alreadyApplied) print(`already applied  ${name}`);
        print(
          result.applied.length === 0
            ? `${database.names.qualified} is up to date`
            : `${database.names.qualified}: applied ${result.applied.length} migration(s)`,
        );
      } finally {
        await database.close();
      }
    });
}
