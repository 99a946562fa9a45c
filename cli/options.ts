import { type Command, InvalidArgumentError } from "commander";
import { printError } from "./output.ts";

export type Env = Record<string, string | undefined>;

/** Flags every command that touches the database accepts. */
export interface ConnectionFlags {
  databaseUrl?: string;
  schema?: string;
  table?: string;
  verbose?: boolean;
  queryTimeoutMs?: number;
}

/**
 * The same environment variables as the Lambdas, so one set of settings serves both; a flag wins over its
 * variable. Help texts name the variable, because in containers that is how the CLI is usually configured.
 */
export function addConnectionOptions(command: Command): Command {
  return command
    .option(
      "--database-url <url>",
      "postgres://user@host:5432/db; prefer env DATABASE_URL (or DATABASE_SECRET_ARN): a password given here " +
        "is visible to other users in the process list",
    )
    .option("--schema <name>", "schema of the outbox table (env OUTBOX_SCHEMA, default public)")
    .option("--table <name>", "outbox table (env OUTBOX_TABLE, default outbox_events)")
    .option(
      "--query-timeout-ms <ms>",
      "give up on a query the database has not answered after this long (default 30000; migrate 900000)",
      integerIn(100, 86_400_000),
    )
    .option("--verbose", "print stack traces and causes on errors");
}

/**
 * The process environment with the flags laid over it, in the variables the shared config readers expect.
 * A --database-url replaces a DATABASE_SECRET_ARN from the environment rather than conflicting with it.
 */
export function envWithFlags(base: Env, overrides: Env): Env {
  const env: Env = { ...base };
  for (const [name, value] of Object.entries(overrides)) {
    if (value !== undefined) env[name] = value;
  }
  if (overrides.DATABASE_URL !== undefined) delete env.DATABASE_SECRET_ARN;
  return env;
}

export function connectionEnv(flags: ConnectionFlags, base: Env = process.env): Env {
  if (flags.databaseUrl !== undefined && urlHasPassword(flags.databaseUrl)) {
    printError(
      "outbox: warning: --database-url contains a password, which other users can read in the process list " +
        "(ps, /proc); set DATABASE_URL in the environment instead, or use DATABASE_SECRET_ARN",
    );
  }
  return envWithFlags(base, {
    DATABASE_URL: flags.databaseUrl,
    OUTBOX_SCHEMA: flags.schema,
    OUTBOX_TABLE: flags.table,
  });
}

function urlHasPassword(url: string): boolean {
  try {
    return new URL(url).password !== "";
  } catch {
    // Unparseable: the configuration reader names the problem; a colon after the user suggests a password.
    return /^[^:]+:\/\/[^/@]*:[^/@]*@/.test(url);
  }
}

/** commander parser for an integer flag in a range; the error names the range. */
export function integerIn(min: number, max: number) {
  return (value: string): number => {
    const parsed = Number(value);
    if (!Number.isInteger(parsed) || parsed < min || parsed > max) {
      throw new InvalidArgumentError(`expected an integer from ${min} to ${max}.`);
    }
    return parsed;
  };
}

/** commander parser for a flag that may be given several times (`--id a --id b`). */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}
