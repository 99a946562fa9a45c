const POLL_MS = 25;

/**
 * Waits until `condition` holds, checking every 25 ms, and fails with `what` and the last observed state if
 * it does not within `timeoutMs`. A bounded wait on observable state (delivery log, table, process events),
 * never a fixed sleep standing in for one.
 */
export async function waitFor(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
  describeState: () => string | Promise<string> = () => "",
): Promise<void> {
  const giveUpAt = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > giveUpAt) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}. ${await describeState()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}
