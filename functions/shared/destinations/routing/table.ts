import type { Env } from "../../util/env.ts";
import { readText } from "../../util/settings.ts";
import { DESTINATION_SETTINGS, destinationSettingFromEnv, type RoutesSetting } from "../setting.ts";
import { lastSegment, type TargetSetting, targetAddress } from "../targets.ts";
import { compileMatch, type RouteMatch } from "./routes.ts";

/**
 * The `destination` name of events no route takes and no default destination: the relay dead-letters them
 * ("no route"); the metrics report them under this name.
 */
export const NO_ROUTE_DESTINATION = "none";

/** One place a route table publishes to, and its name in logs and in the metrics' `destination` dimension. */
export interface RouteLane<T> {
  target: T;
  /** `sqs-fifo:orders.fifo`; `#2`, `#3` appended when two places share a kind and last segment. */
  name: string;
}

export interface RouteTable<T> {
  /** Each distinct place once, routes' first, the default last. */
  lanes: RouteLane<T>[];
  /** A default takes what no route matches; without one, such events are dead-lettered "no route". */
  hasDefault: boolean;
  /** The lane of the first route that matches, else the default's, else undefined (no route). */
  laneOf(aggregateType: string, eventType: string): number | undefined;
}

/**
 * First match wins, then the default: the one matcher the relay's router (router.ts) and the snapshot's
 * per-destination figures (observe/pendingByDestination.ts) both use, so an event is counted where it is sent,
 * under the name the relay's metrics give that place. Places are told apart by identity: routes naming the same
 * place share one lane.
 */
export function routeTable<T>(
  routes: readonly { match: RouteMatch; destination: T }[],
  fallback: T | undefined,
  addressOf: (target: T) => { kind: string; address: string },
): RouteTable<T> {
  const lanes: RouteLane<T>[] = [];
  const laneOf = new Map<T, number>();
  const names = new Set<string>();
  const addLane = (target: T): number => {
    const known = laneOf.get(target);
    if (known !== undefined) return known;
    const { kind, address } = addressOf(target);
    let name = `${kind}:${lastSegment(address)}`;
    for (let n = 2; names.has(name); n++) name = `${kind}:${lastSegment(address)}#${n}`;
    names.add(name);
    lanes.push({ target, name });
    laneOf.set(target, lanes.length - 1);
    return lanes.length - 1;
  };
  const table = routes.map((route) => ({
    matches: compileMatch(route.match),
    lane: addLane(route.destination),
  }));
  const fallbackLane = fallback === undefined ? undefined : addLane(fallback);
  return {
    lanes,
    hasDefault: fallbackLane !== undefined,
    laneOf: (aggregateType, eventType) =>
      table.find((entry) => entry.matches(aggregateType, eventType))?.lane ?? fallbackLane,
  };
}

/**
 * The route table of a setting (OUTBOX_ROUTES and the default), without clients: the same places createDestination
 * (create.ts) builds, one per distinct setting, so the lanes and their names are the relay's.
 */
export function settingRouteTable(setting: RoutesSetting): RouteTable<TargetSetting> {
  const places = new Map<string, TargetSetting>();
  const place = (target: TargetSetting) => {
    const key = JSON.stringify(target);
    const known = places.get(key);
    if (known !== undefined) return known;
    places.set(key, target);
    return target;
  };
  return routeTable(
    setting.routes.map((route) => ({ match: route.match, destination: place(route.destination) })),
    setting.fallback === undefined ? undefined : place(setting.fallback),
    (target) => ({ kind: target.kind, address: targetAddress(target) }),
  );
}

/**
 * The relay's route table as its environment names it (OUTBOX_ROUTES and the default's OUTBOX_QUEUE_URL /
 * OUTBOX_EVENT_BUS_NAME), read by the relay's own reader; undefined without OUTBOX_ROUTES. For a Lambda that
 * reports per destination without publishing (the purge's snapshot).
 */
export function routeTableFromEnv(env: Env): RouteTable<TargetSetting> | undefined {
  if (readText(env, DESTINATION_SETTINGS.routes) === undefined) return undefined;
  const setting = destinationSettingFromEnv(env);
  return setting.kind === "routes" ? settingRouteTable(setting) : undefined;
}
