import { ConfigError, errorMessage } from "../../outbox/errors.ts";
import type { ClaimedRow } from "../../outbox/row.ts";
import { DestinationCheckError } from "../checkFailure.ts";
import type {
  Destination,
  DestinationCheck,
  Prepared,
  PublishResult,
  RequestChannel,
} from "../destination.ts";
import type { RouteMatch } from "./routes.ts";
import { NO_ROUTE_DESTINATION, routeTable } from "./table.ts";

/** One route of a router: the events it matches and the destination that takes them. */
export interface Route {
  match: RouteMatch;
  destination: Destination;
}

/** A prepared message behind the router: its lane (one destination) and the lane's own prepared message. */
export interface Routed {
  lane: number;
  prepared: Prepared<unknown>;
}

interface Lane {
  destination: Destination;
  /** `sqs-fifo:orders.fifo`: logs, the round report, the metrics' `destination` dimension. */
  name: string;
  channel: RequestChannel;
}

/** What a row no route matches, with no default destination, is dead-lettered with. */
export const NO_ROUTE = "no route";

/**
 * One Destination over several: each row goes to the first route whose match takes it, else to the default
 * (`fallback`), else it is rejected permanently as "no route" (dead-lettered at once, so the dead-letter alarms
 * fire: an event is never dropped). The relay's rules hold across destinations because the publisher keeps them
 * per aggregate, wherever its events go:
 * - one request never mixes destinations: `channelOf` gives each destination its own requests, with its own
 *   entry and byte limits;
 * - order per aggregate across destinations: the publisher sends an aggregate's events in waves, one after
 *   another, and holds the rest of an aggregate after a failure, whichever destination failed; the claim never
 *   takes a later event while an earlier one is in backoff. An event is published only after every earlier
 *   event of its aggregate was accepted, wherever that went.
 * - one destination's outage does not stop the others: results are per entry, a failed destination's rows are
 *   `unsent` (backoff, never dead letters) and the other lanes' requests go on in the same round. At cold start
 *   too: the lanes are checked at once and the relay does not wait for the check (`checkBesideRelaying`); a
 *   lane's requests wait for its own check only, so a silent destination holds its own events, not the others'.
 * Routes that name the same Destination object share one lane.
 */
export function routingDestination(routes: readonly Route[], fallback?: Destination): Destination<Routed> {
  if (routes.length === 0 && fallback === undefined) {
    throw new ConfigError("a router needs at least one route or a default destination");
  }
  const table = routeTable(routes, fallback, (destination) => ({
    kind: destination.kind,
    address: destination.target,
  }));
  const lanes: Lane[] = table.lanes.map(({ target: destination, name }, lane) => ({
    destination,
    name,
    channel: {
      id: String(lane),
      maxBatchEntries: destination.maxBatchEntries,
      maxBatchBytes: destination.maxBatchBytes,
    },
  }));
  const route = (row: ClaimedRow): number | undefined => table.laneOf(row.aggregate_type, row.event_type);
  // Each lane's start check, once `check` has started them: a lane's requests wait for its own check only, so a
  // silent destination (its check waiting out its timeout) holds its own events, not the other routes'.
  let laneChecks: Promise<LaneVerdict>[] | undefined;
  const sendLane = async (
    lane: number,
    entries: readonly Prepared<unknown>[],
    signal?: AbortSignal,
  ): Promise<PublishResult[]> => {
    const { destination, name } = lanes[lane] as Lane;
    const verdict = await untilChecked(laneChecks?.[lane], signal);
    if (typeof verdict === "object") {
      // A route that can never work (missing, wrong kind, too small): its events stay pending, never dead
      // letters; the check's own error fails the invocation (relay/invocation.ts, relayBesideCheck).
      const error = `route to ${name} failed its start check: ${verdict.error}`;
      return entries.map(({ row }): PublishResult => ({ row, status: "unsent", error }));
    }
    if (verdict === "pending") {
      const error = `start check of ${name} has not answered yet`;
      return entries.map(({ row }): PublishResult => ({ row, status: "unsent", error }));
    }
    return destination.send(entries, signal);
  };

  const send = async (batch: readonly Prepared<Routed>[], signal?: AbortSignal): Promise<PublishResult[]> => {
    // The publisher sends one channel per request; a mixed batch (another caller) is split, lanes at once.
    const byLane = new Map<number, Prepared<Routed>[]>();
    for (const entry of batch) {
      byLane.set(entry.message.lane, [...(byLane.get(entry.message.lane) ?? []), entry]);
    }
    const sent = await Promise.all(
      [...byLane].map(([lane, entries]) =>
        sendLane(
          lane,
          entries.map((entry) => entry.message.prepared),
          signal,
        ),
      ),
    );
    const byRow = new Map(sent.flat().map((result) => [result.row.id, result]));
    return batch.map(
      (entry) =>
        byRow.get(entry.row.id) ?? {
          row: entry.row,
          status: "uncertain",
          error: `${lanes[entry.message.lane]?.name} returned no result for this entry`,
        },
    );
  };

  const sizes = lanes.map((lane) => lane.destination);
  return {
    kind: "routes",
    target: lanes.map((lane) => lane.name).join(", "),
    maxBatchEntries: Math.max(...sizes.map((d) => d.maxBatchEntries)),
    maxBatchBytes: Math.max(...sizes.map((d) => d.maxBatchBytes)),
    // The pre-screen's bound (sql/loadPayloads.ts) is the largest any lane takes; each lane's prepare checks its own.
    maxMessageBytes: Math.max(...sizes.map((d) => d.maxMessageBytes)),
    prepare(row) {
      const lane = route(row);
      if (lane === undefined) {
        return (
          `${NO_ROUTE}: no route matches aggregate_type ${JSON.stringify(row.aggregate_type)} and event_type ` +
          `${JSON.stringify(row.event_type)}, and there is no default destination`
        );
      }
      const prepared = (lanes[lane] as Lane).destination.prepare(row);
      if (typeof prepared === "string") return prepared;
      return { row, size: prepared.size, message: { lane, prepared } };
    },
    send,
    channelOf: (message) => (lanes[message.message.lane] as Lane).channel,
    destinationOf: (row) => {
      const lane = route(row);
      return lane === undefined ? NO_ROUTE_DESTINATION : (lanes[lane] as Lane).name;
    },
    checkBesideRelaying: true,
    check: async (timeoutMs) => {
      // All lanes at once, each bounded by timeoutMs; their verdicts gate their own sends (sendLane).
      const started = lanes.map((lane) => checkLane(lane, timeoutMs));
      laneChecks = started.map((check) =>
        check.then(
          (): LaneVerdict => "checked",
          (error: unknown): LaneVerdict => ({ error: errorMessage(error) }),
        ),
      );
      const checks = await Promise.all(
        started.map(async (check, lane) => ({ lane: lanes[lane] as Lane, check: (await check) ?? null })),
      );
      const unverified = checks.flatMap(({ lane, check }) =>
        check !== null && !check.verified ? [`${lane.name}: ${check.reason}`] : [],
      );
      return unverified.length === 0
        ? ({ verified: true } satisfies DestinationCheck)
        : { verified: false, reason: unverified.join("; ") };
    },
  };
}

/** A lane's start check as its sends see it: answered (verified or not), or failed for good. */
type LaneVerdict = "checked" | { error: string };

/**
 * Waits for a lane's check, no longer than the request's own signal (the round's publish timeout): a check still
 * running then is `pending`, and the lane's entries are unsent (backoff, retried; never dead letters). No check
 * started (a caller that never checks): undefined, send at once.
 */
async function untilChecked(
  check: Promise<LaneVerdict> | undefined,
  signal?: AbortSignal,
): Promise<LaneVerdict | "pending" | undefined> {
  if (check === undefined) return undefined;
  if (signal === undefined) return check;
  if (signal.aborted) return Promise.race([check, Promise.resolve("pending" as const)]);
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<"pending">((resolve) => {
    onAbort = () => resolve("pending");
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([check, aborted]);
  } finally {
    if (onAbort) signal.removeEventListener("abort", onAbort);
  }
}

/**
 * One lane's start check; a failure names the lane (`route to sns-fifo:payments.fifo: topic ... does not exist`),
 * so with many routes the operator sees which one is wrong. A lane whose service cannot be asked (unreachable,
 * timed out: a DestinationCheckError) is reported unverified instead of failing the invocation: one destination's
 * outage must not stop the others, and its publishes fail loudly on their own (unsent, retried, PublishFailures).
 * A ConfigError (missing, wrong kind) still throws: that route can never work.
 */
async function checkLane(lane: Lane, timeoutMs: number): Promise<DestinationCheck | undefined> {
  try {
    return await lane.destination.check?.(timeoutMs);
  } catch (error) {
    if (error instanceof DestinationCheckError) return { verified: false, reason: error.message };
    if (error instanceof Error) error.message = `route to ${lane.name}: ${error.message}`;
    throw error;
  }
}
