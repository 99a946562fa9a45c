/**
 * Time for what a round loads past its byte budget. A round loads at most RELAY_BATCH_MAX_BYTES, except its first
 * sendable row, which loads whatever its size (engine.ts, OversizeGate): with the claim check up to 1.5 x 64 MiB
 * of jsonb text. The statement and publish timeouts are sized for a round within its budget (the default 5 s
 * for 16 MiB, ~0.5 s of printing at the 35 MB/s measured); a 40 MiB row at load average ~9 did not load in 5 s
 * and was retried every round without a trace (issue 38). So the round that may load such a row gives its load
 * statement, and its publish (the claim check's upload), this much more each, and the round reserve counts both.
 */

/**
 * Bytes per second budgeted for the bytes past the round's budget: 4 MiB/s, a ninth of the 35-54 MB/s Postgres
 * printed jsonb at on the bench machine, and half of what the 40 MiB row fell short of in 5 s.
 */
export const SLOW_LOAD_BYTES_PER_SECOND = 4 * 1_048_576;

/** jsonb's text of a payload: at most 1.5 x its compact JSON (a space after every `,` and `:`). */
export function largestRowTextBytes(maxMessageBytes: number): number {
  return Math.ceil(maxMessageBytes * 1.5);
}

/**
 * Extra milliseconds for `bytes` loaded past a budget of `budgetBytes`, at SLOW_LOAD_BYTES_PER_SECOND. With the
 * construct's largePayloads defaults (64 MiB, budget 16 MiB): (96 - 16) MiB / 4 MiB/s = 20 s; 0 for any round
 * of rows within the budget, and so for every default without the claim check (1.5 MiB < 16 MiB).
 */
export function pastBudgetMs(bytes: number, budgetBytes: number): number {
  return Math.ceil((Math.max(0, bytes - budgetBytes) * 1000) / SLOW_LOAD_BYTES_PER_SECOND);
}

/** The most a round's load (and, again, its publish) gets beyond its timeout: for the largest row it can load. */
export function oversizeAllowanceMs(maxMessageBytes: number, batchMaxBytes: number): number {
  return pastBudgetMs(largestRowTextBytes(maxMessageBytes), batchMaxBytes);
}

/** How a row's last_error begins when its payload did not load in time (sql/loadPayloads.ts); `outbox status` finds them by it. */
export const LOAD_TIMEOUT_ERROR = "payload: did not load within";
