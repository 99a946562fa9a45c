import type { Queryable } from "../db/session.ts";
import { NO_ROUTE_DESTINATION, type RouteTable } from "../destinations/routing/table.ts";
import type { OutboxNames } from "../outbox/names.ts";
import { pendingByRoute } from "./sql/pendingByRoute.ts";

export interface DestinationPending {
  /** The relay's `destination` dimension: `sqs-fifo:orders.fifo`, or `none` for events no route takes. */
  destination: string;
  pending: number;
  /** Age of the oldest pending event bound there; 0 when none is. */
  oldestPendingAgeSeconds: number;
}

export interface PendingByDestination {
  byDestination: DestinationPending[];
  /** More (aggregate_type, event_type) pairs were pending than the statement reads (MAX_PENDING_PAIRS). */
  capped: boolean;
}

/**
 * The backlog per destination: each pending (aggregate_type, event_type) pair is routed by the relay's own route
 * table (routing/table.ts), so an event is counted where the relay sends it. Every lane of the table is reported,
 * zeros included, so a destination's alarm sees 0 rather than missing data; `none` is reported only when the
 * table has no default (else the default takes every unmatched event). Such events are dead-lettered at their
 * first claim, so a `none` age that grows means no relay is claiming.
 */
export async function pendingByDestination(
  db: Queryable,
  names: OutboxNames,
  table: RouteTable<unknown>,
): Promise<PendingByDestination> {
  const { pairs, capped } = await pendingByRoute(db, names);
  const figures = new Map<string, DestinationPending>();
  const figure = (destination: string) => {
    const known = figures.get(destination);
    if (known !== undefined) return known;
    const created = { destination, pending: 0, oldestPendingAgeSeconds: 0 };
    figures.set(destination, created);
    return created;
  };
  for (const lane of table.lanes) figure(lane.name);
  if (!table.hasDefault) figure(NO_ROUTE_DESTINATION);
  for (const pair of pairs) {
    const lane = table.laneOf(pair.aggregateType, pair.eventType);
    const into = figure(lane === undefined ? NO_ROUTE_DESTINATION : (table.lanes[lane]?.name ?? ""));
    into.pending += pair.pending;
    into.oldestPendingAgeSeconds = Math.max(into.oldestPendingAgeSeconds, pair.oldestPendingAgeSeconds);
  }
  return { byDestination: [...figures.values()], capped };
}
