/**
 * What a Postgres error means for the caller, by its SQLSTATE (https://www.postgresql.org/docs/current/errcodes-appendix.html),
 * in one table so the relay, the purge, the migration runner and the consumer classify alike.
 */

/** The SQLSTATE of a pg error (or of the first error in its `cause` chain that has one). */
export function sqlState(error: unknown): string | undefined {
  for (let e: unknown = error; e instanceof Error || isObject(e); e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}

/** 40001 serialization failure, 40P01 deadlock: the server rolled the transaction back; the same work may succeed. */
export function isConflict(error: unknown): boolean {
  const code = sqlState(error);
  return code === "40001" || code === "40P01";
}

/** 55P03 lock_not_available: `lock_timeout` fired waiting for a lock. */
export function isLockNotAvailable(error: unknown): boolean {
  return sqlState(error) === "55P03";
}

/** 28P01 invalid password, 28000 invalid authorization: a rotated secret (or a wrong one). */
export function isAuthenticationFailure(error: unknown): boolean {
  const code = sqlState(error);
  return code === "28P01" || code === "28000";
}

/** Classes 22 (data exception) and 54 (program limit): what one row's data can raise while it is printed. */
export function isRowDataError(error: unknown): boolean {
  return /^(22|54)/.test(sqlState(error) ?? "");
}

/**
 * The database failed, not the statement: class 08 (connection), 57P01-57P03 (admin or crash shutdown, cannot
 * connect now), 53300 (too many connections); or a socket-level failure from pg, which carries Node's error
 * code (ECONNRESET, ...) or none at all.
 */
export function isOutage(error: unknown): boolean {
  const code = sqlState(error);
  if (code !== undefined) return /^(08|57P0[123]$|53300$)/.test(code);
  return error instanceof Error && /ECONN|EPIPE|ETIMEDOUT|Connection terminated/i.test(error.message);
}

function isObject(value: unknown): value is object {
  return typeof value === "object" && value !== null;
}

/**
 * 57014 query_canceled: statement_timeout fired (or pg_cancel_backend). The statement is undone; inside a
 * savepoint the transaction goes on after ROLLBACK TO SAVEPOINT.
 */
export function isStatementCanceled(error: unknown): boolean {
  return sqlState(error) === "57014";
}
