/**
 * One scheduled relay invocation in a process of its own, as a Lambda container runs it: the relay handler's
 * `relay` function with its environment (set by measures/handover.ts), its tick's slot and a context whose
 * remaining time is the scaled Lambda timeout. Exits when the invocation returns.
 */
import type { Context } from "aws-lambda";

const timeoutMs = Number(process.env.BENCH_TIMEOUT_MS);
const started = Date.now();
const context = { getRemainingTimeInMillis: () => timeoutMs - (Date.now() - started) } as unknown as Context;
const { relay } = await import("../../functions/relay/handler.ts");
const summary = await relay({ relaySlot: 0 } as never, context);
process.stdout.write(`${JSON.stringify({ stoppedBy: summary.stoppedBy, published: summary.published })}\n`);
process.exit(0);
