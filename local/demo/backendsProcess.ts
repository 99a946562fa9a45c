/**
 * Runs the throwaway Postgres and SQS endpoint of `npm start` in a process of their own, started in its own
 * process group (detached) by local/demo/backends.ts.
 *
 * Why a separate process: Ctrl-C in a terminal sends SIGINT to the whole foreground process group. Postgres
 * (fast shutdown on SIGINT) and moto (KeyboardInterrupt) would die with it, in the middle of the clean wind-down
 * that Ctrl-C is supposed to start (the relay draining, the consumer catching up). Out of the group, they keep
 * running until the demo is done with them.
 *
 * Protocol: arguments say what to start (`postgres`, `sqs`, or `events` for an endpoint that speaks EventBridge
 * too); one JSON line on stdout reports the URLs (or an error); the servers stop when stdin ends, which is also
 * what happens if the demo dies without cleaning up.
 */

import { startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import { type LocalAwsEndpoint, startAwsEndpoint } from "../backends/awsEndpoint.ts";
import { chooseFromEnvironment } from "../backends/docker.ts";
import { startPostgres } from "../backends/postgres.ts";

export interface BackendsReport {
  postgres?: { url: string; source: string };
  sqs?: { url: string; source: string };
  error?: string;
}

const wanted = new Set(process.argv.slice(2));

/**
 * The endpoint of `npm start --destination eventbridge`: LocalStack when Docker answers; otherwise the in-process
 * endpoint (cli/dev/aws/fakeSqs.ts with cli/dev/aws/eventBridge.ts), not moto. moto routes each event from a bus to an
 * SQS target in about 0.6 s (docs/eventbridge.md), so at the demo's 25 events/s the backlog would only grow; the
 * in-process endpoint speaks the same wire protocol (PutEvents, rules, SQS targets) at full speed.
 */
async function startEventsEndpoint(): Promise<Omit<LocalAwsEndpoint, "source"> & { source: string }> {
  if ((await chooseFromEnvironment()) === "docker") return startAwsEndpoint();
  const fake = await startFakeSqs();
  return { url: fake.url, source: "in-process", stop: () => fake.close() };
}
const stops: (() => Promise<void>)[] = [];
const report = (value: BackendsReport) => process.stdout.write(`${JSON.stringify(value)}\n`);

let stopping: Promise<void> | undefined;
function stopAll(): Promise<void> {
  stopping ??= (async () => {
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => {});
  })();
  return stopping;
}

process.stdin.on("data", () => {});
process.stdin.once("end", () => void stopAll().finally(() => process.exit(0)));
process.once("SIGTERM", () => void stopAll().finally(() => process.exit(0)));

try {
  const [postgres, sqs] = await Promise.allSettled([
    wanted.has("postgres") ? startPostgres() : undefined,
    wanted.has("sqs") ? startAwsEndpoint() : wanted.has("events") ? startEventsEndpoint() : undefined,
  ]);
  // Whatever did start is stopped later, even if the other one failed.
  for (const started of [postgres, sqs]) {
    const server = started.status === "fulfilled" ? started.value : undefined;
    if (server !== undefined) stops.push(() => server.stop());
  }
  if (postgres.status === "rejected") throw postgres.reason;
  if (sqs.status === "rejected") throw sqs.reason;
  const result: BackendsReport = {};
  if (postgres.value !== undefined)
    result.postgres = { url: postgres.value.url, source: postgres.value.source };
  if (sqs.value !== undefined) result.sqs = { url: sqs.value.url, source: sqs.value.source };
  report(result);
} catch (error) {
  report({ error: error instanceof Error ? error.message : String(error) });
  await stopAll();
  process.exit(1);
}
