import {
  type LocalDestination as DemoDestination,
  keepsOrder,
  unorderedBy,
} from "../../cli/dev/destinations.ts";
import { ms } from "../../cli/dev/liveBlock.ts";
import type { FaultProxyStats } from "../fakes/faultProxy.ts";
import type { ChaosReport } from "./chaos.ts";
import type { ConsumerStats } from "./consumer.ts";
import type { Reconciliation } from "./figures.ts";

export interface DemoResult {
  options: {
    durationSeconds: number | null;
    chaos: boolean;
    ratePerSecond: number;
    /** Absent means SQS FIFO. */
    destination?: DemoDestination;
  };
  elapsedSeconds: number;
  reconciled: Reconciliation;
  commitToPublish: { p50: number | null; p99: number | null };
  commitToConsume: { p50: number | null; p99: number | null };
  consumer: ConsumerStats;
  consumerErrors: number;
  lastConsumerError: string;
  writeErrors: number;
  relay: { starts: number; kills: number; warnings: number };
  relayLogFile: string;
  proxy?: FaultProxyStats;
  chaos?: ChaosReport;
}

/**
 * Prints the end-of-run summary and returns the exit code: 1 if an event was lost or (SQS or SNS FIFO, Kinesis)
 * arrived out of order. Through an EventBridge bus, a standard queue or a standard topic the order is not
 * guaranteed, so late arrivals are reported, as information, and only a lost event fails the run; the inbox still
 * applies each outbox id once.
 */
export function printSummary(result: DemoResult, print: (line: string) => void): number {
  const { reconciled: r, consumer } = result;
  const consumed = r.written - r.notConsumed;
  const published = r.written - r.unpublished - r.deadLettered;
  const destination = result.options.destination ?? "sqs-fifo";
  const unordered = !keepsOrder(destination);
  const failed = r.notConsumed > 0 || (!unordered && consumer.orderViolations > 0);
  const row = (label: string, value: string | number, note = "") =>
    print(`  ${label.padEnd(24)}${String(value).padStart(8)}${note === "" ? "" : `   ${note}`}`);

  print("");
  print(
    `summary: ${result.elapsedSeconds.toFixed(1)} s, ${result.options.ratePerSecond} events/s` +
      `${destination === "sqs-fifo" ? "" : `, through ${THROUGH[destination]}`}${result.options.chaos ? ", chaos" : ""}`,
  );
  row(
    "events written",
    r.written,
    result.writeErrors > 0 ? `(${result.writeErrors} write transactions failed and rolled back)` : "",
  );
  row(
    "published",
    published,
    `commit→publish p50 ${ms(result.commitToPublish.p50)}, p99 ${ms(result.commitToPublish.p99)}`,
  );
  row(
    "consumed",
    consumed,
    `commit→consume p50 ${ms(result.commitToConsume.p50)}, p99 ${ms(result.commitToConsume.p99)}`,
  );
  if (r.notConsumed === 0) row("lost", 0);
  else {
    // Not necessarily lost for good (a catch-up that timed out leaves them in the queue), but not proven delivered.
    const stillQueued = r.notConsumed - r.unpublished - r.deadLettered;
    row(
      "not consumed",
      r.notConsumed,
      `(${r.unpublished} never published, ${r.deadLettered} dead-lettered, ${stillQueued} published but not received)`,
    );
  }
  row("duplicates suppressed", consumer.duplicates, "redeliveries the inbox recognised by outbox id");
  if (unordered) {
    row(
      "out of order (info)",
      consumer.lateArrivals,
      `arrived after a later event of their order: ${unorderedBy(destination)} does not order; the read ` +
        "model kept the latest",
    );
  } else row("order violations", consumer.orderViolations);
  row("dead letters", r.deadLettered);
  row(
    "relay processes",
    result.relay.starts,
    `started; ${result.relay.kills} killed, ${result.relay.warnings} warning(s) logged`,
  );
  if (result.chaos !== undefined) {
    const c = result.chaos;
    // Only two things make the consumer see an outbox id twice here: the crash's redelivery, and a relay that
    // republished rows SQS had already accepted (the killed one: its trapped batch and any request of the same
    // round still in flight when it died).
    const redelivered = new Set(c.redelivered);
    const crashCopies = consumer.duplicateIds.filter((id) => redelivered.has(id)).length;
    print("  chaos");
    print(
      `    SQS endpoint down ${c.outageSeconds} s: ${result.proxy?.refused ?? 0} request(s) refused with 503; ` +
        "the rows backed off and went out afterwards",
    );
    const relayCopies = consumer.duplicates - crashCopies;
    print(
      `    relay killed ${c.relayKills}x right after SQS accepted a batch of ${c.unrecordedAccepted.length} ` +
        "(with the rest of its round in flight) it never recorded; republished after the restart with the same " +
        "dedup ids: " +
        (relayCopies === 0
          ? "SQS dropped the copies"
          : `${relayCopies} copy(ies) reached the consumer (this endpoint does not deduplicate against deleted ` +
            "messages; real SQS does for 5 minutes) and the inbox dropped them"),
    );
    print(
      `    consumer crashed ${c.consumerCrashes}x before deleting: ${redelivered.size} message(s) delivered again, ` +
        `${crashCopies} dropped by the inbox`,
    );
  }
  if (result.consumerErrors > 0)
    print(`  consumer errors: ${result.consumerErrors} (last: ${result.lastConsumerError})`);
  print(`  relay log: ${result.relayLogFile}`);
  if (unordered) {
    print(
      failed
        ? `result: FAILED (${r.notConsumed} event(s) not consumed)`
        : "result: OK, every committed event was consumed, exactly once after the inbox (deduplicated by " +
            `outbox id; order not guaranteed by ${unorderedBy(destination)}: ${consumer.lateArrivals} late arrival(s))`,
    );
    return failed ? 1 : 0;
  }
  print(
    failed
      ? `result: FAILED (${r.notConsumed} event(s) not consumed, ${consumer.orderViolations} order violation(s))`
      : "result: OK, every committed event was consumed, exactly once after the inbox, in order per order",
  );
  return failed ? 1 : 0;
}

/** The summary's first line names the way events took, unless it is the default queue. */
const THROUGH: Record<DemoDestination, string> = {
  "sqs-fifo": "an SQS FIFO queue",
  sqs: "a standard SQS queue",
  "sns-fifo": "an SNS FIFO topic",
  sns: "a standard SNS topic",
  kinesis: "a Kinesis stream",
  eventbridge: "an EventBridge bus",
};
