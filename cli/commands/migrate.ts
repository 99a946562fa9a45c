import { Command, Option } from "commander";
import { DEFAULT_INBOX_TABLE, inboxNames, migrateInbox } from "../../functions/shared/consumer/inboxTable.ts";
import { MIGRATE_SETTINGS, migrate } from "../../functions/shared/db/migrate.ts";
import { ROLES_RENEWED_HINT } from "../../functions/shared/db/rolesHere.ts";
import { readLimitsRow, writeLimits } from "../../functions/shared/db/sql/writeLimits.ts";
import { checkOutboxLimits, type OutboxLimits } from "../../functions/shared/outbox/limits.ts";
import { OUTBOX_LOCATION_SETTINGS, outboxNames } from "../../functions/shared/outbox/names.ts";
import { MAX_PAYLOAD_BYTES_LIMIT } from "../../functions/shared/outbox/payloadPointer.ts";
import { MIGRATE_QUERY_TIMEOUT_MS, openOutboxDatabase, outboxTargetFromEnv } from "../database.ts";
import {
  addConnectionOptions,
  type ConnectionFlags,
  connectionEnv,
  flagHelp,
  integerIn,
} from "../options.ts";
import { print, printJson } from "../output.ts";

interface MigrateFlags extends ConnectionFlags {
  migrationsDir?: string;
  json?: boolean;
  /** `--inbox` alone is true (the default table); `--inbox <table>` names it. */
  inbox?: string | true;
  maxMessageBytes?: number;
  maxPayloadBytes?: number;
  claimCheck?: boolean;
}

/**
 * `--max-message-bytes`, `--max-payload-bytes`, `--claim-check` write the outbox's limits row (outbox/limits.ts,
 * docs/large-payloads.md "Limits"): what the write API checks events against. The construct writes it at deploy
 * time; a stack without it (or with `migrations: false`) sets it here. Only the values given change.
 */
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
    .option(
      "--max-message-bytes <bytes>",
      "the smallest message limit of the relay's destinations (a queue's MaximumMessageSize); the write API " +
        "refuses bigger messages unless the claim check is on (1024-1048576; default 1048576)",
      integerIn(1024, 1_048_576),
    )
    .option(
      "--max-payload-bytes <bytes>",
      `the largest payload the outbox accepts, in bytes of its JSON (1024-${MAX_PAYLOAD_BYTES_LIMIT}; default 1048576)`,
      integerIn(1024, MAX_PAYLOAD_BYTES_LIMIT),
    )
    .option(
      "--claim-check",
      "the relay sends messages that do not fit through S3 (OUTBOX_PAYLOAD_BUCKET is set)",
    )
    .option("--no-claim-check", "the relay has no claim check: messages over --max-message-bytes are refused")
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
        const limits = flags.inbox === undefined ? await setLimits(database.pool, names, flags) : undefined;
        if (flags.json) return printJson(limits === undefined ? result : { ...result, limits });
        for (const name of result.applied) print(`applied          ${name}`);
        for (const name of result.alreadyApplied) print(`already applied  ${name}`);
        print(
          result.applied.length === 0
            ? `${names.qualified} is up to date`
            : `${names.qualified}: applied ${result.applied.length} migration(s)`,
        );
        for (const change of result.roles ?? []) {
          print(
            change.action === "renewed"
              ? `roles renewed    ${change.job}: ${JSON.stringify(change.role)} replaces ${JSON.stringify(change.previous)}, ` +
                  `which ${change.sharedWith?.length ? `database ${change.sharedWith.join(", ")} also named` : "no longer exists"}; ` +
                  ROLES_RENEWED_HINT.next
              : `roles recorded   ${change.job}: ${JSON.stringify(change.role)}, made for a database that no longer uses it, is this one's`,
          );
        }
        if (limits !== undefined) {
          print(
            `limits           max_message_bytes ${limits.maxMessageBytes}, max_payload_bytes ` +
              `${limits.maxPayloadBytes}, claim_check ${limits.claimCheck}`,
          );
        }
      } finally {
        await database.close();
      }
    });
}

/** Writes the limits flags given over the row's current values; undefined when none is given. */
async function setLimits(
  pool: Parameters<typeof migrate>[0],
  names: ReturnType<typeof outboxNames>,
  flags: MigrateFlags,
): Promise<OutboxLimits | undefined> {
  const { maxMessageBytes, maxPayloadBytes, claimCheck } = flags;
  if (maxMessageBytes === undefined && maxPayloadBytes === undefined && claimCheck === undefined)
    return undefined;
  const client = await pool.connect();
  try {
    const current = await readLimitsRow(client, names);
    const limits = checkOutboxLimits({
      maxMessageBytes: maxMessageBytes ?? current.maxMessageBytes,
      maxPayloadBytes: maxPayloadBytes ?? current.maxPayloadBytes,
      claimCheck: claimCheck ?? current.claimCheck,
      // Named from the command line: the refusal then says the destinations' limit.
      ...(maxMessageBytes === undefined && current.limitedBy !== undefined
        ? { limitedBy: current.limitedBy }
        : {}),
    });
    await writeLimits(client, names, limits);
    return limits;
  } finally {
    client.release();
  }
}
