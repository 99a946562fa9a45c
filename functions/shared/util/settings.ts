import { ConfigError } from "../outbox/errors.ts";
import { boolean, checkIntegerOption, type Env, integer, oneOf, optionalString } from "./env.ts";

/**
 * One row of a settings table: the environment variable a setting is read from, what unset means, the accepted
 * range and a line of documentation. Each job keeps its table in its own room (relay/settings.ts,
 * purge/settings.ts, ...); the Lambdas read their environment through these rows, the CDK construct writes it
 * under the rows' names, and the CLI builds its flags' help and ranges from them, so a name, a default or a
 * limit is written once.
 */
interface Row<Kind extends string, Default> {
  readonly kind: Kind;
  /** The environment variable. */
  readonly env: string;
  /** The value when the variable is unset or empty; `undefined`: the row's `doc` says what unset means. */
  readonly default: Default;
  readonly doc: string;
}

export interface IntegerSetting<Default extends number | undefined = number | undefined>
  extends Row<"integer", Default> {
  readonly min: number;
  readonly max: number;
}

export interface BooleanSetting extends Row<"boolean", boolean> {}

export interface ChoiceSetting<T extends string = string> extends Row<"choice", T> {
  readonly choices: readonly T[];
}

export interface TextSetting<Default extends string | undefined = string | undefined>
  extends Row<"text", Default> {}

export type Setting = IntegerSetting | BooleanSetting | ChoiceSetting | TextSetting;

/** A table: option name -> row. */
export type SettingsTable = Readonly<Record<string, Setting>>;

export function integerSetting<const D extends number | undefined>(
  row: Omit<IntegerSetting<D>, "kind">,
): IntegerSetting<D> {
  return { kind: "integer", ...row };
}

export function booleanSetting(row: Omit<BooleanSetting, "kind">): BooleanSetting {
  return { kind: "boolean", ...row };
}

export function choiceSetting<const T extends string>(row: Omit<ChoiceSetting<T>, "kind">): ChoiceSetting<T> {
  return { kind: "choice", ...row };
}

export function textSetting<const D extends string | undefined>(
  row: Omit<TextSetting<D>, "kind">,
): TextSetting<D> {
  return { kind: "text", ...row };
}

/** Whether the row's variable holds a value (not unset, not empty), whatever its default. */
export function isSet(env: Env, row: Setting): boolean {
  return optionalString(env, row.env) !== undefined;
}

/** The integer in the row's variable, or its default; out of range fails naming the variable and the limits. */
export function readInteger(env: Env, row: IntegerSetting<number>): number;
export function readInteger(env: Env, row: IntegerSetting): number | undefined;
export function readInteger(env: Env, row: IntegerSetting): number | undefined {
  if (row.default === undefined && optionalString(env, row.env) === undefined) return undefined;
  return integer(env, row.env, row.default ?? 0, row.min, row.max);
}

export function readBoolean(env: Env, row: BooleanSetting): boolean {
  return boolean(env, row.env, row.default);
}

export function readChoice<T extends string>(env: Env, row: ChoiceSetting<T>): T {
  return oneOf(env, row.env, row.choices, row.default);
}

export function readText(env: Env, row: TextSetting<string>): string;
export function readText(env: Env, row: TextSetting): string | undefined;
export function readText(env: Env, row: TextSetting): string | undefined {
  return optionalString(env, row.env) ?? row.default;
}

/**
 * A value given in code (a construct prop, a flag) as the row's variable would hold it, after the same range
 * check the reader makes, so a bad prop fails at synth naming `name` rather than at the Lambda's cold start.
 */
export function settingText(name: string, row: Setting, value: number | boolean | string): string {
  if (row.kind === "integer") checkIntegerOption(name, value as number, row.min, row.max);
  if (row.kind === "choice" && !(row.choices as readonly unknown[]).includes(value)) {
    throw new ConfigError(`${name} must be one of ${row.choices.join(", ")}, got ${JSON.stringify(value)}`);
  }
  return String(value);
}

/** `env NAME, default X` (or `env NAME` when unset means something the caller says), for help texts. */
export function envHelp(row: Setting): string {
  return row.default === undefined ? `env ${row.env}` : `env ${row.env}, default ${row.default}`;
}

/** Every row of the tables, for checks that an environment holds only known variables. */
export function settingRows(...tables: SettingsTable[]): Setting[] {
  return tables.flatMap((table) => Object.values(table));
}
