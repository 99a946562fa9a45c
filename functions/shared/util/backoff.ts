/**
 * Exponential backoff with "equal jitter": half the delay is fixed, half random. Full jitter can pick ~0 and
 * hammer a struggling dependency; no jitter lets rows that failed together retry together forever.
 * attempt 1 waits base..., attempt n waits min(cap, base * 2^(n-1)), half of it jittered.
 */
export function backoffDelayMs(attempt: number, baseMs: number, capMs: number, random = Math.random): number {
  const exponential = Math.min(capMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(exponential / 2 + random() * (exponential / 2));
}
