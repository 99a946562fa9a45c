import type {
  Destination,
  LoadedRow,
  Prepared,
  PublishResult,
  RequestChannel,
} from "../destinations/destination.ts";
import { openTelemetry } from "../observe/tracing.ts";
import type { ClaimedRow } from "../outbox/row.ts";
import { mapConcurrent } from "../util/concurrency.ts";
import { recordingApi, sendInSpan } from "./publishSpan.ts";

export type { LoadedRow, PublishResult };

export interface PublishOptions {
  /** Requests in flight at once (requests of one aggregate are always sequential). */
  concurrency: number;
  /** Aborts requests still in flight (the round's time limit); they count as request failures. */
  signal?: AbortSignal;
}

/**
 * Publishes claimed rows to a destination, whichever it is. Order guarantees, per aggregate: at most one
 * message of an aggregate per request (entries of one request can fail independently, so two of an aggregate
 * in one request could reorder), an aggregate's requests strictly one after another ("waves"), and after a
 * failure the aggregate's later rows are held for the next round. Requests of different aggregates run
 * concurrently. (The claim takes one head per aggregate, so a round normally has one wave.)
 */
export async function publishRows<Message>(
  destination: Destination<Message>,
  rows: readonly LoadedRow[],
  options: PublishOptions,
): Promise<PublishResult[]> {
  const results: PublishResult[] = [];
  const waves: Prepared<Message>[][] = [];
  const positionInAggregate = new Map<string, number>();
  for (const row of rows) {
    const prepared = destination.prepare(row);
    if (typeof prepared === "string") {
      results.push({ row, status: "rejected", error: prepared, permanent: true });
      continue;
    }
    const key = aggregateKey(row);
    const position = positionInAggregate.get(key) ?? 0;
    positionInAggregate.set(key, position + 1);
    const wave = waves[position] ?? [];
    wave.push(prepared);
    waves[position] = wave;
  }

  // Each request in a span when OpenTelemetry is installed and a tracer provider registered (publishSpan.ts).
  const api = recordingApi(await openTelemetry());
  const failedAggregates = new Set<string>();
  for (const wave of waves) {
    const ready = wave.filter((message) => {
      if (!failedAggregates.has(aggregateKey(message.row))) return true;
      results.push({ row: message.row, status: "held" });
      return false;
    });
    const outcomes = await mapConcurrent(packRequests(destination, ready), options.concurrency, (batch) =>
      sendInSpan(api, destination, batch, options.signal),
    );
    for (const outcome of outcomes.flat()) {
      if (outcome.status !== "published") failedAggregates.add(aggregateKey(outcome.row));
      results.push(outcome);
    }
  }
  return results;
}

/**
 * aggregate_id alone, as SQS's MessageGroupId is: aggregates of different types that share an id then also
 * go one after another, which costs nothing in order and keeps "one entry per group per request" on SQS.
 */
function aggregateKey(row: ClaimedRow): string {
  return row.aggregate_id;
}

/**
 * Splits one wave into requests within the destination's entry and byte limits. Behind a router, each channel
 * (one destination) is packed on its own with its own limits: a request never mixes destinations.
 */
function packRequests<Message>(destination: Destination<Message>, messages: readonly Prepared<Message>[]) {
  const channelOf = destination.channelOf?.bind(destination);
  if (channelOf === undefined) return packChannel(destination, messages);
  const channels = new Map<string, { channel: RequestChannel; messages: Prepared<Message>[] }>();
  for (const message of messages) {
    const channel = channelOf(message);
    const entry = channels.get(channel.id) ?? { channel, messages: [] };
    entry.messages.push(message);
    channels.set(channel.id, entry);
  }
  return [...channels.values()].flatMap((entry) => packChannel(entry.channel, entry.messages));
}

function packChannel<Message>(limits: RequestLimits, messages: readonly Prepared<Message>[]) {
  const requests: Prepared<Message>[][] = [];
  let current: Prepared<Message>[] = [];
  let bytes = 0;
  for (const message of messages) {
    if (
      current.length === limits.maxBatchEntries ||
      (current.length > 0 && bytes + message.size > limits.maxBatchBytes)
    ) {
      requests.push(current);
      current = [];
      bytes = 0;
    }
    current.push(message);
    bytes += message.size;
  }
  if (current.length > 0) requests.push(current);
  return requests;
}

type RequestLimits = Pick<RequestChannel, "maxBatchEntries" | "maxBatchBytes">;
