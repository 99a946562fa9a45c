import type { LambdaContextLike } from "./sqsEvent.ts";

/**
 * Whether the invocation still has time for one record: its statement timeout plus a margin. Its own module
 * because two callers ask it: each record before it starts, and the invocation once up front, where a "no"
 * for the first record means the function's timeout is too short for any.
 */

/** Kept free after a record's statement timeout: its COMMIT and the response to Lambda. */
export const DEADLINE_MARGIN_MS = 1_000;

export function fitsDeadline(
  lambdaContext: LambdaContextLike | undefined,
  statementTimeoutMs: number,
): boolean {
  const remaining = lambdaContext?.getRemainingTimeInMillis?.();
  return remaining === undefined || remaining >= statementTimeoutMs + DEADLINE_MARGIN_MS;
}
