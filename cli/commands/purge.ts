import { Command } from "commander";
import { queryTimeoutFor } from "../../functions/shared/db/connection.ts";
import { type PurgeSummary, runPurge } from "../../functions/shared/purge/purge.ts";
import { PURGE_SETTINGS, purgeConfigFromEnv } from "../../functions/shared/purge/settings.ts";
import { openOutboxDatabase } from "../database.ts";
import { EXIT_FAILURE } from "../errors.ts";
import { createLogger, defaultLogFormat } from "../logger.ts";
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

interface PurgeFlags extends ConnectionFlags {
  retentionHours?: number;
  deadLetterRetentionHours?: number;
  batchSize?: number;
  maxSeconds: number;
  json?: boolean;
}

const P = PURGE_SETTINGS;

export function purgeCommand(): Command {
  return addConnectionOptions(new Command("purge"))
    .description(
      "Run the purge job now: delete published rows older than the retention (and, if set, old dead letters) " +
        "in bounded batches. Pending rows are never touched. SIGTERM/SIGINT stop between batches.",
    )
    .option(
      "--retention-hours <h>",
      flagHelp(P.retentionHours, "keep published rows this long"),
      integerFlag(P.retentionHours),
    )
    .option(
      "--dead-letter-retention-hours <h>",
      `${flagHelp(P.deadLetterRetentionHours, "also delete dead letters older than this")}; default: keep them`,
      integerFlag(P.deadLetterRetentionHours),
    )
    .option("--batch-size <n>", flagHelp(P.batchSize), integerFlag(P.batchSize))
    .option("--max-seconds <s>", "stop starting batches after this long", integerIn(1, 86_400), 3_600)
    .option("--json", "print the summary as JSON")
    .action(async (flags: PurgeFlags) => {
      const config = purgeConfigFromEnv(
        envWithFlags(connectionEnv(flags), {
          [P.retentionHours.env]: flags.retentionHours?.toString(),
          [P.deadLetterRetentionHours.env]: flags.deadLetterRetentionHours?.toString(),
          [P.batchSize.env]: flags.batchSize?.toString(),
        }),
      );
      const database = await openOutboxDatabase(
        { source: config.database, location: { schema: config.purge.schema, table: config.purge.table } },
        { queryTimeoutMs: queryTimeoutFor(config.purge.statementTimeoutMs) },
      );
      const controller = new AbortController();
      const stop = () => controller.abort();
      process.once("SIGTERM", stop);
      process.once("SIGINT", stop);
      let summary: PurgeSummary;
      try {
        summary = await runPurge(
          {
            pool: database.pool,
            deadline: Date.now() + flags.maxSeconds * 1000,
            logger: createLogger(defaultLogFormat()),
            signal: controller.signal,
          },
          config.purge,
        );
      } finally {
        process.off("SIGTERM", stop);
        process.off("SIGINT", stop);
        await database.close();
      }
      if (flags.json) printJson(summary);
      else print(describe(summary));
      if (summary.stoppedBy === "error") process.exitCode = EXIT_FAILURE;
    });
}

const OUTCOME: Record<PurgeSummary["stoppedBy"], string> = {
  drained: "purge done",
  deadline: "purge stopped at --max-seconds (more may be left)",
  signal: "purge stopped by a signal",
  error: "purge failed",
};

function describe(summary: PurgeSummary): string {
  const line =
    `${OUTCOME[summary.stoppedBy]}: deleted ${summary.deletedRows} published row(s)` +
    `${summary.deletedDeadLetters > 0 ? ` and ${summary.deletedDeadLetters} dead letter(s)` : ""} ` +
    `in ${summary.batches} batch(es), ${(summary.durationMs / 1000).toFixed(1)} s`;
  return summary.error === undefined ? line : `${line}\nerror: ${escapeControl(summary.error)}`;
}
