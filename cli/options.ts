import { type Command, InvalidArgumentError } from "commander";
import { DATABASE_SETTINGS } from "../functions/shared/db/settings.ts";
import { OUTBOX_LOCATION_SETTINGS } from "../functions/shared/outbox/names.ts";
import type { Env } from "../functions/shared/util/env.ts";
import { envHelp, type IntegerSetting, type Setting } from "../functions/shared/util/settings.ts";
import { printError } from "./output.ts";

const { url, secretArn } = DATABASE_SETTINGS;
const { schema, table } = OUTBOX_LOCATION_SETTINGS;

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
      `postgres://user@host:5432/db; prefer env ${url.env} (or ${secretArn.env}): a password given here ` +
        "is visible to other users in the process list",
    )
    .option("--schema <name>", flagHelp(schema))
    .option("--table <name>", flagHelp(table))
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
  if (overrides[url.env] !== undefined) delete env[secretArn.env];
  return env;
}

export function connectionEnv(flags: ConnectionFlags, base: Env = process.env): Env {
  if (flags.databaseUrl !== undefined && urlHasPassword(flags.databaseUrl)) {
    printError(
      "outbox: warning: --database-url contains a password, which other users can read in the process list " +
        `(ps, /proc); set ${url.env} in the environment instead, or use ${secretArn.env}`,
    );
  }
  return envWithFlags(base, {
    [url.env]: flags.databaseUrl,
    [schema.env]: flags.schema,
    [table.env]: flags.table,
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

/**
 * A flag's help from the setting it overrides: the row's doc (or `what`, when the flag means something more
 * specific), its variable and its default, so the help cannot drift from what the Lambdas read.
 */
export function flagHelp(row: Setting, what: string = row.doc): string {
  return `${what} (${envHelp(row)})`;
}

/** commander parser for an integer flag that overrides a setting: the setting's range. */
export function integerFlag(row: IntegerSetting) {
  return integerIn(row.min, row.max);
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
