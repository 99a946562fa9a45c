import { ConfigError } from "../outbox/errors.ts";
import type { InboxEvent } from "./inboxEvent.ts";
import type { InboxRecord } from "./inboxRecord.ts";
import type { InboxClient } from "./libraries.ts";
import { isPayloadParser, type PayloadParser, parsePayload } from "./payloadParser.ts";
import type { LambdaContextLike } from "./sqsEvent.ts";

/**
 * Which handler an event goes to: the one handler, or the route for its event type, each behind its parse hook.
 * Built once per createInboxHandler, so a malformed routes object fails at creation rather than on the first
 * record; and answering per event (not per batch) keeps "no handler for event type" a fault of that record alone.
 */

export interface InboxHandlerContext {
  /**
   * The record's transaction: write through it so the writes commit with the inbox row. Transaction control
   * (begin, commit, rollback, end, abort, set transaction, prepare transaction) is refused; savepoints of your
   * own are fine. Do not keep it: it refuses everything once the handler has returned. `enqueue(client, …)` joins
   * the record's transaction; for Drizzle, Kysely and Prisma see pgClientOf, kyselyPoolOf and prismaPoolOf.
   */
  client: InboxClient;
  /** The record as delivered: an SQS record, or a Kinesis record (`"kinesis" in record`) from a stream. */
  record: InboxRecord;
  lambdaContext: LambdaContextLike | undefined;
}

export type InboxRecordHandler<Payload = unknown> = (
  event: InboxEvent<Payload>,
  context: InboxHandlerContext,
) => Promise<void> | void;

/** A route: a handler, or a handler with a `parse` hook that validates (and types) the payload first. */
export type InboxRoute<Payload = unknown> =
  | InboxRecordHandler<Payload>
  | { parse: PayloadParser<Payload>; handle: InboxRecordHandler<Payload> };

/**
 * Handlers by event type, for `createInboxHandler(routes, ...)`. Each route's payload type is its own:
 * `{ "order.placed": (e: InboxEvent<Order>) => ..., "order.paid": { parse: paidSchema, handle } }`.
 */
export type InboxRoutes<Payloads extends Record<string, unknown> = Record<string, unknown>> = {
  [EventType in keyof Payloads]: InboxRoute<Payloads[EventType]>;
};

/**
 * A route with a `parse` hook, its handler's payload typed by what the hook returns (TypeScript cannot infer
 * that inside a routes object on its own): `"order.placed": inboxRoute({ parse: orderSchema, handle })`.
 */
export function inboxRoute<Payload>(route: {
  parse: PayloadParser<Payload>;
  handle: InboxRecordHandler<Payload>;
}): InboxRoute<Payload> {
  return route;
}

/** Thrown for an event type that has no route (with `unknownEventTypes: "fail"`). */
export class UnroutedEventError extends ConfigError {
  override name = "UnroutedEventError";
}

/** The handler for an event (its parse hook first), or undefined for an event type to record and skip. */
export type EventRouter = (event: InboxEvent) => InboxRecordHandler<unknown> | undefined;

export function eventRouter(
  handler: InboxRecordHandler<unknown> | InboxRoutes,
  unknown: "fail" | "ignore",
  parse: PayloadParser<unknown> | undefined,
): EventRouter {
  if (typeof handler === "function") return () => withParse(handler, parse);
  const routes = new Map<string, InboxRecordHandler<unknown>>();
  for (const [eventType, route] of Object.entries(handler as InboxRoutes)) {
    if (typeof route === "function") {
      routes.set(eventType, route);
    } else if (
      typeof route === "object" &&
      route !== null &&
      typeof route.handle === "function" &&
      isPayloadParser(route.parse)
    ) {
      routes.set(eventType, withParse(route.handle, route.parse));
    } else {
      throw new ConfigError(
        `createInboxHandler: the route for ${JSON.stringify(eventType)} is not a function or { parse, handle }`,
      );
    }
  }
  return (event) => {
    const route = routes.get(event.eventType);
    if (route === undefined && unknown === "fail") {
      throw new UnroutedEventError(
        `no handler for event type ${JSON.stringify(event.eventType)} (routes: ${[...routes.keys()].join(", ")}); ` +
          'add one, or pass unknownEventTypes: "ignore"',
      );
    }
    return route;
  };
}

function withParse(
  handle: InboxRecordHandler<unknown>,
  parse: PayloadParser<unknown> | undefined,
): InboxRecordHandler<unknown> {
  if (parse === undefined) return handle;
  return async (event, context) => handle(await parsePayload(parse, event), context);
}
