/**
 * One small hierarchy so callers can branch on `instanceof` and logs carry a stable `name`.
 * Every wrapper passes `{ cause }` so the original stack and SQLSTATE survive.
 */
export class OutboxError extends Error {
  override name = "OutboxError";
}

/** Input the write API or the relay refuses; `field` names what was wrong. */
export class ValidationError extends OutboxError {
  override name = "ValidationError";
  readonly field: string;
  constructor(field: string, problem: string, options?: ErrorOptions) {
    super(`${field}: ${problem}`, options);
    this.field = field;
  }
}

/** A configuration value (environment variable, option) is missing or malformed. */
export class ConfigError extends OutboxError {
  override name = "ConfigError";
}

/** A migration file could not be applied. */
export class MigrationError extends OutboxError {
  override name = "MigrationError";
}

/**
 * A table, column or function of ours is missing: the migrations have not run in this database (or not this
 * version's). The message says what to run; the database's error is the cause.
 */
export class NotMigratedError extends OutboxError {
  override name = "NotMigratedError";
}

/** The database did not answer within the client-side query timeout; the session was discarded. */
export class DatabaseTimeoutError extends OutboxError {
  override name = "DatabaseTimeoutError";
}

/**
 * COMMIT was answered with ROLLBACK: the transaction had already failed (a statement error the caller caught, a
 * deferred constraint), so nothing it wrote is in the database. Postgres reports this as a successful COMMIT
 * whose command tag is ROLLBACK, not as an error ("COMMIT ... If the transaction is in an aborted state, it is
 * rolled back": https://www.postgresql.org/docs/current/sql-commit.html), so it must be checked.
 */
export class TransactionRolledBackError extends OutboxError {
  override name = "TransactionRolledBackError";
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
