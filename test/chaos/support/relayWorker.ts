/**
 * A relay process for the chaos suite: what the Lambda container does, without Lambda. It reads the same
 * environment as functions/relay/handler.ts (relayConfigFromEnv), builds the same pool and SQS client, and runs
 * `runRelay` invocation after invocation until told to stop. Each invocation gets CHAOS_INVOCATION_MS, like a
 * Lambda timeout: the deadline handed to runRelay is that minus RELAY_BUDGET_MARGIN_MS, and if the invocation
 * has not returned by the timeout itself, the process kills itself with SIGKILL, as Lambda resets a runtime.
 *
 * Talks to the parent over the IPC channel (see relayProcess.ts); logs nothing of its own.
 */
import { createDatabasePool } from "../../../functions/shared/db/connection.ts";
import { createDestination } from "../../../functions/shared/destinations/create.ts";
import { runRelay } from "../../../functions/shared/relay/engine.ts";
import { relayConfigFromEnv } from "../../../functions/shared/relay/settings.ts";
import { integer } from "../../../functions/shared/util/env.ts";
import type { Logger } from "../../../functions/shared/util/logger.ts";
import type { WorkerMessage } from "./relayProcess.ts";

const send = (message: WorkerMessage) => process.send?.(message);
if (process.send === undefined)
  throw new Error("relayWorker.ts runs as a child with an IPC channel (relayProcess.ts)");

const config = relayConfigFromEnv(process.env);
const invocationMs = integer(process.env, "CHAOS_INVOCATION_MS", 60_000, 1_000, 900_000);
const pool = await createDatabasePool(config.database, {
  max: 2,
  applicationName: "chaos-relay",
  onError: () => {}, // a session ended by a Postgres restart; the next checkout opens a fresh one
});
// As the handler builds it: the queue or the bus the environment names, the SDK retrying a little.
const { destination, destroy } = await createDestination(config.destination, {
  sockets: config.relay.concurrency * config.relay.parallelRounds,
  requestTimeoutMs: config.relay.publishTimeoutMs,
});
const stop = new AbortController();
process.on("message", (message) => {
  if (message === "stop") stop.abort();
});
process.on("disconnect", () => stop.abort()); // the parent went away: finish the round and leave

const logger: Logger = {
  info: () => {},
  warn: () => {},
  error: (message, fields) => {
    if (message.startsWith("relay round failed")) send({ type: "roundFailed", error: String(fields.error) });
  },
};

send({ type: "ready", pid: process.pid });
while (!stop.signal.aborted) {
  const started = Date.now();
  const timeout = setTimeout(() => {
    send({ type: "hardTimeout" });
    process.kill(process.pid, "SIGKILL");
  }, invocationMs);
  const summary = await runRelay(
    {
      pool,
      destination,
      deadline: started + invocationMs - config.budgetMarginMs,
      logger,
      signal: stop.signal,
      onRound: (report) =>
        send({ type: "round", claimed: report.claimed, published: report.published, failed: report.failed }),
    },
    config.relay,
  );
  clearTimeout(timeout);
  send({
    type: "invocation",
    stoppedBy: summary.stoppedBy,
    published: summary.published,
    ms: Date.now() - started,
  });
}
await pool.end();
destroy();
process.disconnect?.();
