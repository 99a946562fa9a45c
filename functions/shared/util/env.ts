import { ConfigError } from "../outbox/errors.ts";

/** A process environment (`process.env`) or a copy of one: the single shape every reader of settings takes. */
export type Env = Record<string, string | undefined>;

/*
 * Typed environment getters. Each names the variable and the accepted range in its error, and tests for
 * `undefined`/empty rather than truthiness so "0" and "false" are real values. Called at cold start, so bad
 * configuration fails the deployment's first invocation loudly rather than some later event.
 */

function raw(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}

export function requiredString(env: Env, name: string): string {
  const value = raw(env, name);
  if (value === undefined) throw new ConfigError(`${name} is required but not set`);
  return value;
}

export function optionalString(env: Env, name: string): string | undefined {
  return raw(env, name);
}

export function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < min || parsed > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return parsed;
}

/** The same range rule for an option passed in code (not read from the environment). */
export function checkIntegerOption(name: string, value: number | null, min: number, max: number): void {
  if (value === null || !Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got ${value}`);
  }
}

export function boolean(env: Env, name: string, fallback: boolean): boolean {
  const value = raw(env, name)?.toLowerCase();
  if (value === undefined) return fallback;
  if (["true", "1", "yes"].includes(value)) return true;
  if (["false", "0", "no"].includes(value)) return false;
  throw new ConfigError(`${name} must be true or false, got ${JSON.stringify(env[name])}`);
}

export function oneOf<T extends string>(env: Env, name: string, choices: readonly T[], fallback: T): T {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (!(choices as readonly string[]).includes(value)) {
    throw new ConfigError(`${name} must be one of ${choices.join(", ")}, got ${JSON.stringify(value)}`);
  }
  return value as T;
}
