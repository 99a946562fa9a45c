import { NotMigratedError } from "../outbox/errors.ts";
import type { OutboxNames } from "../outbox/names.ts";
import { sqlState } from "./sqlstate.ts";

/**
 * What to do when a table of ours is missing or older than the code: the sentences the CLI prints before a command
 * and `enqueue` and the inbox throw on the SQLSTATE, written once.
 */

export interface MigrateHint {
  /** The table is not there (42P01). */
  missing: string;
  /** A later migration's column or function is not there (42703, 42883). */
  behind: string;
}

/** The outbox's: `outbox migrate`, or the location points elsewhere (`where` says how the location is set). */
export function outboxMigrateHint(names: OutboxNames, where: string): MigrateHint {
  return {
    missing:
      `the outbox table ${names.qualified} does not exist in this database: run \`outbox migrate\` first ` +
      `(or check ${where})`,
    behind: `the outbox table ${names.qualified} is older than this package: run \`outbox migrate\` first`,
  };
}

/** The inbox's: `outbox migrate --inbox`, or migrateInbox at deploy. */
export function inboxMigrateHint(names: OutboxNames): MigrateHint {
  const flags = `${names.schema === "public" ? "" : ` --schema ${names.schema}`} --inbox ${names.table}`;
  const run =
    `run \`outbox migrate${flags}\` (or await migrateInbox(pool, { schema: ${JSON.stringify(names.schema)}, ` +
    `table: ${JSON.stringify(names.table)} })) first`;
  return {
    missing: `the inbox ${names.qualified} is not migrated in this database: ${run} (or check the inbox's schema and table options)`,
    behind: `the inbox ${names.qualified} is older than this package: ${run}`,
  };
}

/**
 * 42P01 undefined_table, 42703 undefined_column, 42883 undefined_function
 * (https://www.postgresql.org/docs/current/errcodes-appendix.html). Read only from statements that name nothing
 * of the caller's, where they can mean only that our schema is missing or behind.
 */
const MISSING = "42P01";
const BEHIND = new Set(["42703", "42883"]);

/** `error` itself, or a NotMigratedError saying what to run, with `error` as its cause (its SQLSTATE kept there). */
export function withMigrateHint(error: unknown, hint: MigrateHint): unknown {
  const code = libraryState(error) ?? sqlState(error);
  const text =
    code === MISSING ? hint.missing : code !== undefined && BEHIND.has(code) ? hint.behind : undefined;
  if (text === undefined) return error;
  const detail = error instanceof Error ? error.message : String(error);
  return new NotMigratedError(`${text} (${code}: ${detail})`, { cause: error });
}

/**
 * Prisma's driver adapters report a database error as P2010 (which looks like a SQLSTATE) with the real one in
 * `meta.driverAdapterError.cause.originalCode`.
 */
function libraryState(error: unknown): string | undefined {
  const meta = (error as { meta?: { driverAdapterError?: { cause?: { originalCode?: unknown } } } } | null)
    ?.meta;
  const code = meta?.driverAdapterError?.cause?.originalCode;
  return typeof code === "string" ? code : undefined;
}
