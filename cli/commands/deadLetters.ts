import { Command } from "commander";
import { type DeadLetter, listDeadLetters } from "../../functions/shared/operate/sql/listDeadLetters.ts";
import { openOutboxDatabase, outboxTargetFromEnv } from "../database.ts";
import { addConnectionOptions, type ConnectionFlags, connectionEnv, integerIn } from "../options.ts";
import { type Column, formatTable, print, printJson } from "../output.ts";

interface DeadLetterFlags extends ConnectionFlags {
  eventType?: string;
  aggregateType?: string;
  aggregateId?: string;
  limit: number;
  json?: boolean;
}

const COLUMNS: Column<DeadLetter>[] = [
  { header: "ID", value: (row) => row.id },
  { header: "EVENT TYPE", value: (row) => row.event_type, maxWidth: 32 },
  { header: "AGGREGATE", value: (row) => `${row.aggregate_type}/${row.aggregate_id}`, maxWidth: 40 },
  { header: "ATTEMPTS", value: (row) => String(row.attempts), align: "right" },
  { header: "DEAD SINCE", value: (row) => row.dead_lettered_at.toISOString().replace(/\.\d+Z$/, "Z") },
  { header: "LAST ERROR", value: (row) => row.last_error ?? "", maxWidth: 80 },
];

export function deadLettersCommand(): Command {
  return addConnectionOptions(new Command("dead-letters"))
    .description("List dead letters (events the relay gave up on), oldest first")
    .option("--event-type <type>", "only this event type")
    .option("--aggregate-type <type>", "only this aggregate type")
    .option("--aggregate-id <id>", "only this aggregate")
    .option("--limit <n>", "show at most n", integerIn(1, 10_000), 50)
    .option("--json", "print as JSON (full last_error, ISO timestamps)")
    .action(async (flags: DeadLetterFlags) => {
      const database = await openOutboxDatabase(outboxTargetFromEnv(connectionEnv(flags)), {
        ...(flags.queryTimeoutMs === undefined ? {} : { queryTimeoutMs: flags.queryTimeoutMs }),
      });
      try {
        const page = await database.withSession((client) =>
          listDeadLetters(client, database.names, {
            ...(flags.eventType === undefined ? {} : { eventType: flags.eventType }),
            ...(flags.aggregateType === undefined ? {} : { aggregateType: flags.aggregateType }),
            ...(flags.aggregateId === undefined ? {} : { aggregateId: flags.aggregateId }),
            limit: flags.limit,
          }),
        );
        if (flags.json) return printJson({ total: page.total, deadLetters: page.rows });
        if (page.total === 0) return print("no dead letters");
        print(formatTable(page.rows, COLUMNS));
        print();
        print(
          page.total > page.rows.length
            ? `showing ${page.rows.length} of ${page.total} dead letters (--limit to see more)`
            : `${page.total} dead letter(s); \`outbox redrive --id <ID>\` returns one to the relay`,
        );
      } finally {
        await database.close();
      }
    });
}
