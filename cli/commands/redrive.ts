import { Command, Option } from "commander";
import { withTransaction } from "../../functions/shared/db/session.ts";
import {
  checkRedriveSelector,
  hasSelector,
  type RedrivenEvent,
  type RedriveSelector,
  redriveDeadLetters,
} from "../../functions/shared/operate/sql/redriveDeadLetters.ts";
import { openOutboxDatabase, outboxTargetFromEnv } from "../database.ts";
import { CliError, EXIT_USAGE } from "../errors.ts";
import { addConnectionOptions, type ConnectionFlags, collect, connectionEnv } from "../options.ts";
import { type Column, formatTable, print, printJson } from "../output.ts";

interface RedriveFlags extends ConnectionFlags {
  id?: string[];
  eventType?: string;
  aggregateType?: string;
  aggregateId?: string;
  all?: boolean;
  dryRun?: boolean;
  json?: boolean;
}

const COLUMNS: Column<RedrivenEvent>[] = [
  { header: "ID", value: (row) => row.id },
  { header: "EVENT TYPE", value: (row) => row.event_type, maxWidth: 32 },
  { header: "AGGREGATE", value: (row) => `${row.aggregate_type}/${row.aggregate_id}`, maxWidth: 40 },
  { header: "ATTEMPTS", value: (row) => String(row.previous_attempts), align: "right" },
  {
    header: "NOTE",
    value: (row) => (row.overtaken ? "later event of this group already published" : ""),
  },
];

/** Dry run = the real statement in a transaction that is rolled back: it shows exactly what a run would change. */
class RollbackDryRun extends Error {
  readonly rows: RedrivenEvent[];
  constructor(rows: RedrivenEvent[]) {
    super("dry run");
    this.rows = rows;
  }
}

export function redriveCommand(): Command {
  return addConnectionOptions(new Command("redrive"))
    .description(
      "Return dead letters to pending (attempts 0, available now; last_error kept with a redrive note) " +
        "so the relay publishes them again. Criteria combine with AND.",
    )
    .option("--id <uuid>", "this outbox id (repeatable)", collect)
    .option("--event-type <type>", "every dead letter of this event type")
    .option("--aggregate-type <type>", "every dead letter of this aggregate type")
    .option("--aggregate-id <id>", "every dead letter of this aggregate")
    .addOption(
      new Option("--all", "every dead letter").conflicts(["id", "eventType", "aggregateType", "aggregateId"]),
    )
    .option("--dry-run", "show what would be redriven; change nothing")
    .option("--json", "print as JSON")
    .action(async (flags: RedriveFlags) => {
      const selector: RedriveSelector = {
        ...(flags.id === undefined ? {} : { ids: flags.id }),
        ...(flags.eventType === undefined ? {} : { eventType: flags.eventType }),
        ...(flags.aggregateType === undefined ? {} : { aggregateType: flags.aggregateType }),
        ...(flags.aggregateId === undefined ? {} : { aggregateId: flags.aggregateId }),
        ...(flags.all ? { all: true } : {}),
      };
      if (!hasSelector(selector)) {
        throw new CliError(
          "say which dead letters to redrive: --id <uuid> (repeatable), --event-type, --aggregate-type, " +
            "--aggregate-id, or --all (see `outbox dead-letters`)",
          EXIT_USAGE,
        );
      }
      checkRedriveSelector(selector);
      const database = await openOutboxDatabase(outboxTargetFromEnv(connectionEnv(flags)), {
        ...(flags.queryTimeoutMs === undefined ? {} : { queryTimeoutMs: flags.queryTimeoutMs }),
      });
      try {
        const rows = await withTransaction(database.pool, async (client) => {
          const changed = await redriveDeadLetters(client, database.names, selector);
          if (flags.dryRun) throw new RollbackDryRun(changed);
          return changed;
        }).catch((error: unknown) => {
          if (error instanceof RollbackDryRun) return error.rows;
          throw error;
        });
        report(rows, flags);
      } finally {
        await database.close();
      }
    });
}

function report(rows: RedrivenEvent[], flags: RedriveFlags) {
  const dryRun = flags.dryRun === true;
  const overtakenGroups = [
    ...new Set(rows.filter((row) => row.overtaken).map((row) => row.aggregate_id)),
  ].sort();
  if (flags.json) return printJson({ dryRun, redriven: rows.length, overtakenGroups, events: rows });
  if (rows.length === 0) return print("no dead letters matched; nothing changed");
  print(formatTable(rows, COLUMNS));
  print();
  print(
    dryRun
      ? `would redrive ${rows.length} dead letter(s); nothing changed (dry run)`
      : `redrove ${rows.length} dead letter(s): pending again, attempts reset; the relay publishes them next round`,
  );
  const overtaken = rows.filter((row) => row.overtaken).length;
  if (overtaken > 0) {
    // The group is the ordering unit (MessageGroupId = aggregate_id): name the groups so an operator can tell
    // their consumers, or fix them up, before (dry run) or after the redrive.
    print(
      `warning: ${overtaken} of them ${dryRun ? "would be" : "are"} older than events of the same message group ` +
        "that were already published (even if purged since); consumers will receive them after those, out of " +
        `order, in ${overtakenGroups.length} group(s): ${overtakenGroups.join(", ")}`,
    );
  }
}
