import { type Env, optionalString } from "../util/env.ts";
import { textSetting } from "../util/settings.ts";
import { ConfigError } from "./errors.ts";

/**
 * Where the outbox lives. Both names are configurable so several services can share a database; they are
 * validated here and only ever reach SQL through `quoteIdent`, never raw.
 */
export interface OutboxLocation {
  schema?: string;
  table?: string;
}

export interface OutboxNames {
  schema: string;
  table: string;
  /** `"schema"."table"`, safe to splice into SQL. */
  qualified: string;
  /** Quoted, schema-qualified name of an object that belongs to this outbox (index, view, function). */
  related(suffix: string): string;
  /** Unquoted name of a related object, for catalog lookups with bound parameters. */
  relatedName(suffix: string): string;
}

export const DEFAULT_SCHEMA = "public";
export const DEFAULT_TABLE = "outbox_events";

/**
 * Letters, digits, `_`, `$`, `-` and spaces. Quotes, dots, semicolons and control characters are refused even
 * though quoting would neutralise them: a name containing them is a mistake or an attack, never a wish.
 * 40 characters leaves room for the longest suffix under Postgres's 63-byte identifier limit.
 */
const IDENTIFIER = /^[\p{L}_][\p{L}\p{N}_$ -]{0,39}$/u;

export function validateIdentifier(field: string, value: string): string {
  if (!IDENTIFIER.test(value) || Buffer.byteLength(value) > 40) {
    throw new ConfigError(
      `${field}: ${JSON.stringify(value)} is not an accepted identifier ` +
        "(1-40 characters: a letter or _ first, then letters, digits, _, $, - or spaces)",
    );
  }
  return value;
}

/** Where the outbox lives, for every entry point (the Lambdas, the CLI, the construct's migrations). */
export const OUTBOX_LOCATION_SETTINGS = {
  schema: textSetting({ env: "OUTBOX_SCHEMA", default: DEFAULT_SCHEMA, doc: "schema of the outbox table" }),
  table: textSetting({ env: "OUTBOX_TABLE", default: DEFAULT_TABLE, doc: "the outbox table" }),
} as const;

/**
 * OUTBOX_SCHEMA and OUTBOX_TABLE, as every entry point reads them. Unset stays unset (outboxNames applies the
 * defaults), and the names are validated there, where they meet SQL.
 */
export function outboxLocationFromEnv(env: Env): OutboxLocation {
  const schema = optionalString(env, OUTBOX_LOCATION_SETTINGS.schema.env);
  const table = optionalString(env, OUTBOX_LOCATION_SETTINGS.table.env);
  return { ...(schema === undefined ? {} : { schema }), ...(table === undefined ? {} : { table }) };
}

export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * "public.outbox_events" is the table's name as psql prints it, so it is the first thing people pass; quoting it
 * whole would name a table with a dot in it. Say where the schema goes instead of "not an accepted identifier".
 */
function unqualified(table: string): string {
  const [schema, name, ...rest] = table.split(".");
  if (name === undefined || rest.length > 0) return table;
  throw new ConfigError(
    `table: ${JSON.stringify(table)} names a schema: pass it on its own, the schema option ` +
      `({ schema: ${JSON.stringify(schema)}, table: ${JSON.stringify(name)} }; ` +
      `${OUTBOX_LOCATION_SETTINGS.schema.env} for the Lambdas, --schema for the CLI)`,
  );
}

export function outboxNames(location: OutboxLocation = {}): OutboxNames {
  const schema = validateIdentifier("schema", location.schema ?? DEFAULT_SCHEMA);
  const table = validateIdentifier("table", unqualified(location.table ?? DEFAULT_TABLE));
  // "outbox_events" -> prefix "outbox", so the default objects read outbox_dead_letters, outbox_migrations.
  const prefix = table.replace(/_events$/, "");
  const relatedName = (suffix: string) => `${prefix}_${suffix}`;
  return {
    schema,
    table,
    qualified: `${quoteIdent(schema)}.${quoteIdent(table)}`,
    relatedName,
    related: (suffix) => `${quoteIdent(schema)}.${quoteIdent(relatedName(suffix))}`,
  };
}
