import { Command } from "commander";
import { withTransaction } from "../../functions/shared/db/session.ts";
import {
  type EventTypeSnapshot,
  type OutboxSnapshot,
  outboxSnapshot,
} from "../../functions/shared/observe/sql/outboxSnapshot.ts";
import { type SlowPayloads, slowPayloads } from "../../functions/shared/observe/sql/slowPayloads.ts";
import { openOutboxDatabase, outboxTargetFromEnv } from "../database.ts";
import { addConnectionOptions, type ConnectionFlags, connectionEnv } from "../options.ts";
import { type Column, formatAge, formatTable, print, printJson } from "../output.ts";

interface StatusFlags extends ConnectionFlags {
  json?: boolean;
}

const BY_TYPE: Column<EventTypeSnapshot>[] = [
  { header: "EVENT TYPE", value: (row) => row.eventType, maxWidth: 48 },
  { header: "PENDING", value: (row) => String(row.pending), align: "right" },
  {
    header: "OLDEST PENDING",
    value: (row) => (row.pending === 0 ? "-" : formatAge(row.oldestPendingAgeSeconds)),
    align: "right",
  },
  { header: "DEAD LETTERS", value: (row) => String(row.deadLetters), align: "right" },
];

export function statusCommand(): Command {
  return addConnectionOptions(new Command("status"))
    .description(
      "How the outbox stands: backlog and its age, dead letters, blocked aggregates, per event type",
    )
    .option("--json", "print as JSON (for scripts and monitoring)")
    .action(async (flags: StatusFlags) => {
      const database = await openOutboxDatabase(outboxTargetFromEnv(connectionEnv(flags)), {
        ...(flags.queryTimeoutMs === undefined ? {} : { queryTimeoutMs: flags.queryTimeoutMs }),
      });
      try {
        // One snapshot, one instant: both statements see the same data, and a read-only transaction with a
        // statement timeout cannot disturb the relay.
        const snapshot = await withTransaction(
          database.pool,
          async (client) => ({
            ...(await outboxSnapshot(client, database.names)),
            slowPayloads: await slowPayloads(client, database.names),
          }),
          {
            readOnlySnapshot: true,
            statementTimeoutMs: 30_000,
          },
        );
        if (flags.json) return printJson({ table: database.names.qualified, ...snapshot });
        print(describe(database.names.qualified, snapshot));
      } finally {
        await database.close();
      }
    });
}

function describe(table: string, snapshot: OutboxSnapshot & { slowPayloads: SlowPayloads }): string {
  const lines = [
    `outbox ${table}`,
    `  pending             ${snapshot.pending}${snapshot.pending > 0 ? ` (oldest ${formatAge(snapshot.oldestPendingAgeSeconds)})` : ""}`,
    `  dead letters        ${snapshot.deadLetters}${snapshot.deadLetters > 0 ? "  (outbox dead-letters)" : ""}`,
    `  blocked aggregates  ${snapshot.blockedAggregates}${snapshot.blockedAggregates > 0 ? "  (head event in backoff or dead-lettered)" : ""}`,
  ];
  const slow = snapshot.slowPayloads;
  if (slow.count > 0) {
    lines.push(
      `  slow to load        ${slow.count}  (payload did not load in its budget; retried, never dead-lettered)`,
    );
    for (const row of slow.rows) {
      lines.push(
        `    ${row.id} ${row.aggregateId} ${row.eventType} x${row.transientFailures}: ${row.lastError}`,
      );
    }
  }
  if (snapshot.byEventType.length > 0) lines.push("", formatTable(snapshot.byEventType, BY_TYPE));
  return lines.join("\n");
}
