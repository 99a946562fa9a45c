/**
 * `npm start`: the whole pipeline on this machine, with a live view. An orders service writes orders and their
 * events in one transaction; the relay (the Lambda's engine, as `outbox relay`) publishes them to an SQS FIFO
 * queue; a consumer receives them, deduplicates with an inbox table and checks per-order order.
 *
 *   npm start                          runs until Ctrl-C
 *   npm start -- --duration 60         stops by itself
 *   npm start -- --chaos               kills the relay mid-batch, takes SQS down, crashes the consumer
 *   npm start -- --destination <kind>  publishes to sqs-fifo (the default), sqs (standard), sns-fifo or sns (a
 *                                      topic with the consumer's queue subscribed), kinesis (a stream the
 *                                      consumer polls) or eventbridge (a bus whose rule feeds the consumer's queue)
 *
 * Needs nothing running: Postgres and an AWS endpoint are started locally (DATABASE_URL, AWS_ENDPOINT_URL or
 * OUTBOX_QUEUE_URL, when set, are used instead). Exits 1 if an event was lost or arrived out of order (through
 * a bus or a standard queue or topic, which do not order, only if one was lost).
 */
import { Command, Option } from "commander";
import { LOCAL_DESTINATIONS, type LocalDestination } from "../cli/dev/destinations.ts";
import { integerIn } from "../cli/options.ts";
import { DemoRun, printSummary } from "./demo/run.ts";

const say = (line: string) => process.stdout.write(`${line}\n`);

const options = new Command("npm start --")
  .description(
    "Run producer -> outbox -> relay -> SQS FIFO (or another --destination) -> consumer locally, with a live view",
  )
  .option(
    "--duration <seconds>",
    "stop after this many seconds (default: run until Ctrl-C)",
    integerIn(1, 86_400),
  )
  .option(
    "--chaos",
    "kill the relay mid-batch, make SQS fail for a few seconds, crash the consumer once (sqs-fifo only)",
  )
  .addOption(
    new Option(
      "--destination <kind>",
      "where the relay publishes, named as OUTBOX_ROUTES names the kinds (docs/routing.md): sqs-fifo (a FIFO " +
        "queue), sqs (a standard queue), sns-fifo / sns (a topic with the consumer's queue subscribed, raw " +
        "message delivery), kinesis (a stream the consumer polls), eventbridge (a bus whose rule delivers to the " +
        "consumer's queue; on LocalStack when Docker answers, else on the in-process endpoint, because moto " +
        "routes about 2 events/s from a bus to a queue). The others run on LocalStack or moto. Order is kept " +
        "per order by sqs-fifo, sns-fifo and kinesis only",
    )
      .choices(LOCAL_DESTINATIONS)
      .default("sqs-fifo"),
  )
  .option(
    "--rate <events/s>",
    "events written per second; moto's cost per message grows with the queue's depth, so the default leaves " +
      "it room to work off the backlog of an SQS outage",
    integerIn(1, 2_000),
    25,
  )
  .option(
    "--open-orders <n>",
    "orders in progress at once (= message groups in flight)",
    integerIn(1, 100_000),
    100,
  )
  .parse(process.argv)
  .opts<{
    duration?: number;
    chaos?: boolean;
    rate: number;
    openOrders: number;
    destination: LocalDestination;
  }>();

if (options.chaos === true && options.destination !== "sqs-fifo") {
  // The chaos faults are SQS FIFO's (the proxy recognises SendMessageBatch to kill the relay after an accepted
  // batch, and the order the run checks is the FIFO queue's); the bus's faults are exercised by
  // test/chaos/eventbridge.chaos.ts, the other destinations' by test/destinations/routing.handler.test.ts.
  process.stderr.write(
    `npm start: --chaos runs with --destination sqs-fifo (the default) only, not ${options.destination}\n`,
  );
  process.exit(2);
}

const demo = new DemoRun(
  {
    durationSeconds: options.duration ?? null,
    chaos: options.chaos === true,
    ratePerSecond: options.rate,
    openOrders: options.openOrders,
    destination: options.destination,
  },
  say,
);

let interrupts = 0;
const onSignal = () => {
  interrupts++;
  if (interrupts === 1) {
    say("\nstopping: no new orders; the relay drains and the consumer catches up (Ctrl-C again to quit now)");
    demo.requestStop();
    return;
  }
  demo.forceStop();
  void demo.tearDown().finally(() => process.exit(130));
};
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);
// However this process ends, the relay child must not outlive it.
process.on("exit", () => demo.forceStop());

let exitCode = 1;
try {
  await demo.setUp();
  const result = await demo.run();
  exitCode = printSummary(result, say);
} catch (error) {
  process.stderr.write(`npm start: ${error instanceof Error ? error.message : String(error)}\n`);
} finally {
  await demo.tearDown();
}
process.exit(exitCode);
