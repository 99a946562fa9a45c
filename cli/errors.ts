import { isAuthenticationFailure } from "../functions/shared/db/sqlstate.ts";
import { DestinationCheckError } from "../functions/shared/destinations/checkFailure.ts";
import {
  ConfigError,
  DatabaseTimeoutError,
  errorMessage,
  MigrationError,
  ValidationError,
} from "../functions/shared/outbox/errors.ts";

/**
 * Exit codes, so scripts can tell "you called me wrong" from "the system is unwell":
 * 1 = the command ran and something failed (database unreachable, events not published),
 * 2 = usage or configuration (bad flag, missing variable, no table yet).
 */
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** An error whose message is already written for an operator: printed as is, without a stack trace. */
export class CliError extends Error {
  override name = "CliError";
  readonly exitCode: number;
  constructor(message: string, exitCode: number, options?: ErrorOptions) {
    super(message, options);
    this.exitCode = exitCode;
  }
}

interface NodeSystemError {
  code?: string;
  address?: string;
  port?: number;
  hostname?: string;
  errors?: NodeSystemError[];
}

/** pg and Node report connection failures as system errors; a failed dual-stack connect is an AggregateError. */
function systemError(error: unknown): NodeSystemError | undefined {
  if (error === null || typeof error !== "object") return undefined;
  const candidate = error as NodeSystemError;
  return candidate.code === undefined ? candidate.errors?.[0] : candidate;
}

function databaseHost(url: string | undefined): string {
  if (url === undefined) return "the database";
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || 5432}${parsed.pathname}`;
  } catch {
    return "the database";
  }
}

/**
 * Turns what the driver or the AWS SDK threw into one line an operator can act on. Anything unrecognised keeps
 * its own message; --verbose adds the stack.
 */
export function describeError(error: unknown, context: { databaseUrl?: string } = {}): CliError {
  if (error instanceof CliError) return error;
  if (error instanceof ConfigError || error instanceof ValidationError) {
    return new CliError(error.message, EXIT_USAGE, { cause: error });
  }
  if (
    error instanceof MigrationError ||
    error instanceof DestinationCheckError ||
    error instanceof DatabaseTimeoutError
  )
    return new CliError(error.message, EXIT_FAILURE, { cause: error });
  const where = databaseHost(context.databaseUrl);
  const system = systemError(error);
  const message = error instanceof Error ? error.message : String(error);
  const fail = (text: string) => new CliError(text, EXIT_FAILURE, { cause: error });
  if (isAuthenticationFailure(error)) {
    return fail(`cannot connect to ${where}: authentication failed (${message})`);
  }
  switch (system?.code) {
    case "ECONNREFUSED":
      return fail(`cannot connect to ${where}: connection refused (is Postgres running? check DATABASE_URL)`);
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return fail(`cannot connect to ${where}: host not found (check DATABASE_URL)`);
    case "ETIMEDOUT":
      return fail(`cannot connect to ${where}: timed out (network, security group or firewall?)`);
    case "3D000":
      return fail(`cannot connect to ${where}: ${message}`);
  }
  if (/timeout expired|Connection terminated due to connection timeout/i.test(message)) {
    return fail(`cannot connect to ${where}: timed out after 5 s (network, security group or firewall?)`);
  }
  return fail(errorMessage(error));
}

/** The stack and the chain of causes, for --verbose. */
export function verboseDetails(error: unknown): string {
  const lines: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && depth < 5; depth++) {
    if (current instanceof Error)
      lines.push(depth === 0 ? String(current.stack) : `caused by: ${current.stack}`);
    else lines.push(`caused by: ${String(current)}`);
    current = current instanceof Error ? current.cause : undefined;
  }
  return lines.join("\n");
}
