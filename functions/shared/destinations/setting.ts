import { ConfigError } from "../outbox/errors.ts";
import type { Env } from "../util/env.ts";
import { integerSetting, isSet, readInteger, readText, textSetting } from "../util/settings.ts";
import { DEFAULT_EVENT_SOURCE } from "./eventBridge/eventBridge.ts";
import { parseRoutes, type RouteSetting } from "./routing/routes.ts";
import { SQS_MAX_MESSAGE_BYTES } from "./sqs/limits.ts";
import {
  type EventBridgeSetting,
  eventBridgeSetting,
  type SqsFifoSetting,
  sqsFifoSetting,
  targetAddress,
  targetName,
} from "./targets.ts";

export {
  type EventBridgeSetting,
  eventBridgeSetting,
  type SqsFifoSetting,
  sqsFifoSetting,
} from "./targets.ts";

/**
 * A route table (OUTBOX_ROUTES): each event goes to the first route that matches it, else to the default (the
 * queue or bus of OUTBOX_QUEUE_URL / OUTBOX_EVENT_BUS_NAME, optional here), else it is dead-lettered "no route".
 */
export interface RoutesSetting {
  kind: "routes";
  routes: RouteSetting[];
  fallback?: SqsFifoSetting | EventBridgeSetting;
}

/**
 * Where one relay (one outbox table) publishes: one SQS FIFO queue, one EventBridge bus, or a route table over
 * several places.
 */
export type DestinationSetting = SqsFifoSetting | EventBridgeSetting | RoutesSetting;

/**
 * Where the relay publishes, as its environment says: exactly one of the queue and the bus, each with the one
 * option that applies to it (the rules are destinationSettingFromEnv's).
 */
export const DESTINATION_SETTINGS = {
  queueUrl: textSetting({
    env: "OUTBOX_QUEUE_URL",
    default: undefined,
    doc: "the SQS FIFO queue the relay publishes to (or OUTBOX_EVENT_BUS_NAME, not both)",
  }),
  maxMessageBytes: integerSetting({
    env: "RELAY_MAX_MESSAGE_BYTES",
    default: SQS_MAX_MESSAGE_BYTES,
    min: 1024,
    max: SQS_MAX_MESSAGE_BYTES,
    doc: "the queue's MaximumMessageSize: bigger events are dead-lettered, not sent (queue only)",
  }),
  eventBusName: textSetting({
    env: "OUTBOX_EVENT_BUS_NAME",
    default: undefined,
    doc: "the EventBridge bus (name or ARN) the relay publishes to (or OUTBOX_QUEUE_URL, not both)",
  }),
  routes: textSetting({
    env: "OUTBOX_ROUTES",
    default: undefined,
    doc:
      "a JSON route table: events go to the first route that matches their aggregate and event type, else to " +
      "OUTBOX_QUEUE_URL / OUTBOX_EVENT_BUS_NAME (optional with routes), else are dead-lettered (docs/routing.md)",
  }),
  eventSource: textSetting({
    env: "OUTBOX_EVENT_SOURCE",
    default: DEFAULT_EVENT_SOURCE,
    doc: "the events' source on the bus (bus only; not aws.-prefixed)",
  }),
} as const;

/**
 * Reads the destination: `OUTBOX_QUEUE_URL` (SQS FIFO, with the optional `RELAY_MAX_MESSAGE_BYTES`) or
 * `OUTBOX_EVENT_BUS_NAME` (EventBridge, with the optional `OUTBOX_EVENT_SOURCE`). Exactly one of the two must be
 * set: both is ambiguous and neither publishes nowhere, so each is a configuration error that names them, at
 * cold start. A setting that applies only to the other destination is an error too, not silently ignored.
 * With `OUTBOX_ROUTES`, the route table (routing/routes.ts, refused at cold start when malformed) and the queue
 * or bus, now optional, as the default for events no route matches.
 */
export function destinationSettingFromEnv(env: Env): DestinationSetting {
  const routes = readText(env, DESTINATION_SETTINGS.routes);
  if (routes === undefined) return defaultDestinationFromEnv(env);
  const table = parseRoutes(routes, DESTINATION_SETTINGS.routes.env);
  const { queueUrl, eventBusName } = DESTINATION_SETTINGS;
  const hasDefault = readText(env, queueUrl) !== undefined || readText(env, eventBusName) !== undefined;
  if (!hasDefault) {
    for (const row of [DESTINATION_SETTINGS.maxMessageBytes, DESTINATION_SETTINGS.eventSource]) {
      if (isSet(env, row)) {
        throw new ConfigError(
          `${row.env} applies only to the default destination (${queueUrl.env} / ${eventBusName.env}), ` +
            "which is not set; a route takes its own options",
        );
      }
    }
    return { kind: "routes", routes: table };
  }
  return { kind: "routes", routes: table, fallback: defaultDestinationFromEnv(env) };
}

/** The one queue or bus of OUTBOX_QUEUE_URL / OUTBOX_EVENT_BUS_NAME (exactly one must be set). */
function defaultDestinationFromEnv(env: Env): SqsFifoSetting | EventBridgeSetting {
  const {
    queueUrl: queue,
    eventBusName: bus,
    eventSource: source,
    maxMessageBytes: size,
  } = DESTINATION_SETTINGS;
  const queueUrl = readText(env, queue);
  const eventBusName = readText(env, bus);
  if (queueUrl !== undefined && eventBusName !== undefined) {
    throw new ConfigError(
      `${queue.env} and ${bus.env} are both set; set exactly one: the SQS FIFO queue or the ` +
        "EventBridge bus this relay publishes to",
    );
  }
  if (eventBusName !== undefined) {
    if (isSet(env, size)) {
      throw new ConfigError(
        `${size.env} applies only to an SQS queue (${queue.env}); an EventBridge bus's limit is fixed`,
      );
    }
    return eventBridgeSetting(eventBusName, readText(env, source), bus.env, source.env);
  }
  if (queueUrl === undefined) {
    throw new ConfigError(
      `neither ${queue.env} nor ${bus.env} is set; set exactly one: the SQS FIFO queue or the ` +
        `EventBridge bus this relay publishes to (or ${DESTINATION_SETTINGS.routes.env}, a route table)`,
    );
  }
  if (isSet(env, source)) {
    throw new ConfigError(`${source.env} applies only to an EventBridge bus (${bus.env}); unset it`);
  }
  return sqsFifoSetting(queueUrl, readInteger(env, size), queue.env);
}

/** For logs and error messages: the queue URL, the bus, or the routes' places. */
export function describeDestination(setting: DestinationSetting): string {
  if (setting.kind === "sqs-fifo") return `SQS queue ${setting.queueUrl}`;
  if (setting.kind === "eventbridge") return `EventBridge bus ${setting.eventBusName}`;
  const places = [...new Set(setting.routes.map((route) => targetName(route.destination)))];
  const fallback =
    setting.fallback === undefined ? "no default" : `default ${targetAddress(setting.fallback)}`;
  return `${setting.routes.length} route(s) to ${places.join(", ")}; ${fallback}`;
}
