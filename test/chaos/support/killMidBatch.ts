import { within } from "./chaosSuite.ts";
import type { ChaosContext } from "./scenario.ts";

/**
 * When each share of the events has been delivered, SIGKILLs one relay inside a SendMessageBatch and starts a
 * new one. The kill lands mid-request: the endpoint accepts the batch (the body is already in), the relay never
 * hears back and never records it; its transaction dies with the process, and the rows are claimed again.
 */
export async function killRelaysMidBatch(
  ctx: ChaosContext,
  shares: readonly number[],
  what: string,
  deliveredWithinMs: number,
): Promise<void> {
  for (const share of shares) {
    await ctx.waitFor(
      `${share * 100}% delivered`,
      () => ctx.delivered() >= ctx.load.events * share,
      deliveredWithinMs,
    );
    let endFault = () => {};
    const killed = new Promise<void>((resolve) => {
      ctx.fake.setFaults({
        latencyMs: (action) => {
          if (action !== "SendMessageBatch") return 0;
          ctx.fake.setFaults({ latencyMs: 0 });
          endFault = ctx.beginFault(what);
          void ctx.fleet.killOne().then(resolve);
          return 0;
        },
      });
    });
    await within("a relay to be killed mid-batch", 30_000, killed);
    await ctx.fleet.start();
    endFault();
  }
}
