import { createHash } from "node:crypto";
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
  /**
   * The outbox's private schema (migration 0016): created and owned by the migration owner, CREATE for nobody
   * else, so no producer, relay, purge or consumer role can drop, replace or add an object there. It holds
   * everything the SECURITY DEFINER trigger and the relay call or read (PRIVATE_OBJECTS); `related` names them
   * there.
   */
  privateSchema: string;
  /** Where `related(suffix)` was before migration 0016 moved it: the migrations before it create it there. */
  relatedBefore0016(suffix: string): string;
}

/**
 * What migration 0016 moved from the outbox's schema into its private schema: the definer trigger function and
 * all it calls or reads (the text bound, the group lock key, the limits), the order-key check the relay calls
 * and the marks it reads, the trace check and high-water trigger functions, and the roles table migrations
 * read their grantees from. Whoever owns the outbox's schema can drop any object in it, whoever its owner
 * (PostgreSQL docs, DROP: "the owner of the schema"), and create one under a dropped object's name: code that
 * calls such a name with the migration owner's or the relay's rights would run that schema owner's code.
 */
export const PRIVATE_OBJECTS: ReadonlySet<string> = new Set([
  "commit_order",
  "text_bound",
  "group_lock_key",
  "limits",
  "order_key_state",
  "group_high_water",
  "deleted_on_publish",
  "high_water_only_rises",
  "check_trace_context",
  "roles",
]);

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
  const privateSchema = privateSchemaName(schema, table);
  const relatedBefore0016 = (suffix: string) => `${quoteIdent(schema)}.${quoteIdent(relatedName(suffix))}`;
  return {
    schema,
    table,
    qualified: `${quoteIdent(schema)}.${quoteIdent(table)}`,
    relatedName,
    privateSchema,
    relatedBefore0016,
    related: (suffix) =>
      PRIVATE_OBJECTS.has(suffix)
        ? `${quoteIdent(privateSchema)}.${quoteIdent(relatedName(suffix))}`
        : relatedBefore0016(suffix),
  };
}

/**
 * `outbox_private:<schema>.<table>`, one per outbox (two outboxes of a database may have different owners); past
 * Postgres's 63-byte identifier limit an md5 of `<schema>.<table>` stands for it, as the roles' names do (0009).
 */
function privateSchemaName(schema: string, table: string): string {
  const name = `outbox_private:${schema}.${table}`;
  if (Buffer.byteLength(name) <= 63) return name;
  return `outbox_private:${createHash("md5").update(`${schema}.${table}`).digest("hex")}`;
}
