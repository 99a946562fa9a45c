import { ConfigError } from "../../outbox/errors.ts";
import { SNS_MAX_MESSAGE_BYTES, SNS_MAX_TOPIC_MESSAGE_BYTES } from "../sns/sns.ts";
import { SQS_MAX_MESSAGE_BYTES } from "../sqs/limits.ts";
import { isQueueUrl } from "../sqs/queueUrl.ts";
import { eventBridgeSetting, STREAM_ARN, STREAM_NAME, type TargetSetting, TOPIC_ARN } from "../targets.ts";

/**
 * The route table: which events go where. Read once at cold start from one setting (OUTBOX_ROUTES), a JSON array
 * of `{ "match": { "aggregateType"?: pattern | pattern[], "eventType"?: pattern | pattern[] }, "destination":
 * { "kind": ..., ... } }`. A pattern is a literal or holds `*` wildcards (any run of characters); a field left out
 * matches every value. The first route that matches an event takes it; events no route matches go to the default
 * destination, or are dead-lettered "no route" when there is none (routing/router.ts).
 *
 * A table that cannot be what its author meant is refused here, naming the route by index and the problem: JSON
 * that does not parse, an unknown kind or field, a bad URL or ARN, a FIFO-only option on a standard target (a
 * `.fifo` name on a standard kind, a group or deduplication id), and a route no event can reach (after a catch-all,
 * a duplicate, or shadowed by an earlier route that takes everything it matches).
 */
export interface RouteMatch {
  /** Patterns of aggregate_type; absent: every type. */
  aggregateType?: readonly string[];
  /** Patterns of event_type; absent: every type. */
  eventType?: readonly string[];
}

export interface RouteSetting {
  match: RouteMatch;
  destination: TargetSetting;
}

/**
 * Routes per table. Bounds the cold-start check (quadratic in the routes), the per-event match, and the
 * per-destination metric lines per window (one per destination, observe/metrics.ts).
 */
export const MAX_ROUTES = 50;
const MAX_PATTERN_LENGTH = 256;

const KINDS = ["sqs-fifo", "sqs", "sns-fifo", "sns", "kinesis", "eventbridge"] as const;
type Kind = (typeof KINDS)[number];

/** The fields each kind takes, besides `kind`. */
const FIELDS: Record<Kind, readonly string[]> = {
  "sqs-fifo": ["queueUrl", "maxMessageBytes"],
  sqs: ["queueUrl", "maxMessageBytes"],
  "sns-fifo": ["topicArn", "maxMessageBytes"],
  sns: ["topicArn", "maxMessageBytes"],
  kinesis: ["streamArn", "streamName"],
  eventbridge: ["busName", "source"],
};

/** Options that only a FIFO target has: on a standard kind they would be silently meaningless. */
const FIFO_ONLY = new Set([
  "messageGroupId",
  "groupId",
  "messageDeduplicationId",
  "deduplicationId",
  "contentBasedDeduplication",
]);

/** Parses and checks a route table; every error names `variable[index]` and the field at fault. */
export function parseRoutes(text: string, variable = "OUTBOX_ROUTES"): RouteSetting[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`${variable} is not valid JSON: ${(error as Error).message}`, { cause: error });
  }
  if (!Array.isArray(parsed)) {
    throw new ConfigError(`${variable} must be a JSON array of routes, got ${typeName(parsed)}`);
  }
  if (parsed.length === 0) {
    throw new ConfigError(`${variable} is an empty list: add a route, or unset it`);
  }
  if (parsed.length > MAX_ROUTES) {
    throw new ConfigError(`${variable} has ${parsed.length} routes, the limit is ${MAX_ROUTES}`);
  }
  const routes = parsed.map((route, index) => parseRoute(route, `${variable}[${index}]`));
  checkReachable(routes, variable);
  return routes;
}

function parseRoute(value: unknown, at: string): RouteSetting {
  const route = object(value, at);
  unknownFields(route, ["match", "destination"], at);
  if (!("match" in route)) {
    throw new ConfigError(`${at}: match is missing (use "match": {} to match every event)`);
  }
  if (!("destination" in route)) throw new ConfigError(`${at}: destination is missing`);
  return { match: parseMatch(route.match, `${at}.match`), destination: parseTarget(route.destination, at) };
}

function parseMatch(value: unknown, at: string): RouteMatch {
  const match = object(value, at);
  unknownFields(match, ["aggregateType", "eventType"], at);
  const result: RouteMatch = {};
  for (const field of ["aggregateType", "eventType"] as const) {
    if (match[field] === undefined) continue;
    const raw = match[field];
    const list = typeof raw === "string" ? [raw] : raw;
    if (!Array.isArray(list) || list.length === 0) {
      throw new ConfigError(`${at}.${field} must be a pattern or a non-empty array of patterns`);
    }
    for (const pattern of list) {
      if (typeof pattern !== "string" || pattern.length === 0 || pattern.length > MAX_PATTERN_LENGTH) {
        throw new ConfigError(
          `${at}.${field}: each pattern must be a string of 1-${MAX_PATTERN_LENGTH} characters, got ${JSON.stringify(pattern)}`,
        );
      }
    }
    result[field] = [...new Set(list as string[])];
  }
  return result;
}

function parseTarget(value: unknown, route: string): TargetSetting {
  const at = `${route}.destination`;
  const target = object(value, at);
  const kind = target.kind;
  if (typeof kind !== "string" || !(KINDS as readonly string[]).includes(kind)) {
    throw new ConfigError(`${at}.kind: unknown kind ${JSON.stringify(kind)}; one of ${KINDS.join(", ")}`);
  }
  const k = kind as Kind;
  for (const field of Object.keys(target)) {
    if (field === "kind" || FIELDS[k].includes(field)) continue;
    if (FIFO_ONLY.has(field)) {
      throw new ConfigError(
        `${at}.${field}: ${k === "sqs-fifo" || k === "sns-fifo" ? "is set by the relay (group = aggregate_id, deduplication = outbox id), not by a route" : `a FIFO-only option on a standard target (kind ${k})`}`,
      );
    }
    throw new ConfigError(`${at}.${field}: unknown field for kind ${k} (it takes ${FIELDS[k].join(", ")})`);
  }
  switch (k) {
    case "sqs-fifo":
    case "sqs": {
      const queueUrl = text(target.queueUrl, `${at}.queueUrl`);
      if (!isQueueUrl(queueUrl)) {
        throw new ConfigError(
          `${at}.queueUrl must be an SQS queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>), got ${JSON.stringify(queueUrl)}`,
        );
      }
      checkFifoName(queueUrl, k === "sqs-fifo", `${at}.queueUrl`, "queue", "sqs");
      const maxMessageBytes = size(target.maxMessageBytes, SQS_MAX_MESSAGE_BYTES, SQS_MAX_MESSAGE_BYTES, at);
      return { kind: k, queueUrl, maxMessageBytes };
    }
    case "sns-fifo":
    case "sns": {
      const topicArn = text(target.topicArn, `${at}.topicArn`);
      if (!TOPIC_ARN.test(topicArn)) {
        throw new ConfigError(
          `${at}.topicArn must be an SNS topic ARN (arn:aws:sns:<region>:<account>:<name>), got ${JSON.stringify(topicArn)}`,
        );
      }
      checkFifoName(topicArn, k === "sns-fifo", `${at}.topicArn`, "topic", "sns");
      const maxMessageBytes = size(
        target.maxMessageBytes,
        SNS_MAX_MESSAGE_BYTES,
        SNS_MAX_TOPIC_MESSAGE_BYTES,
        at,
      );
      return { kind: k, topicArn, maxMessageBytes };
    }
    case "kinesis": {
      const { streamArn, streamName } = target;
      if ((streamArn === undefined) === (streamName === undefined)) {
        throw new ConfigError(`${at}: set exactly one of streamArn and streamName`);
      }
      if (streamArn !== undefined) {
        const arn = text(streamArn, `${at}.streamArn`);
        if (!STREAM_ARN.test(arn)) {
          throw new ConfigError(
            `${at}.streamArn must be a Kinesis stream ARN (arn:aws:kinesis:<region>:<account>:stream/<name>), got ${JSON.stringify(arn)}`,
          );
        }
        return { kind: "kinesis", stream: { streamArn: arn } };
      }
      const name = text(streamName, `${at}.streamName`);
      if (!STREAM_NAME.test(name)) {
        throw new ConfigError(
          `${at}.streamName must be a stream name (1-128 of letters, digits, _ . -), got ${JSON.stringify(name)}`,
        );
      }
      return { kind: "kinesis", stream: { streamName: name } };
    }
    case "eventbridge": {
      const busName = text(target.busName, `${at}.busName`);
      const source = target.source === undefined ? undefined : text(target.source, `${at}.source`);
      return eventBridgeSetting(busName, source, `${at}.busName`, `${at}.source`);
    }
  }
}

/** A FIFO queue's or topic's name ends in `.fifo`, and only theirs (SQS and SNS naming rules). */
function checkFifoName(address: string, fifo: boolean, at: string, what: string, standardKind: string) {
  const isFifo = address.endsWith(".fifo");
  if (fifo && !isFifo) {
    throw new ConfigError(
      `${at}: a FIFO ${what}'s name ends in .fifo; for a standard ${what} use kind ${standardKind}, got ${JSON.stringify(address)}`,
    );
  }
  if (!fifo && isFifo) {
    throw new ConfigError(
      `${at}: ${JSON.stringify(address)} is a FIFO ${what} (.fifo), a FIFO-only target for a standard kind: use kind ${standardKind}-fifo`,
    );
  }
}

function size(value: unknown, fallback: number, max: number, at: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1024 || value > max) {
    throw new ConfigError(
      `${at}.maxMessageBytes must be an integer from 1024 to ${max}, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/**
 * Refuses a route no event can reach: one whose every event an earlier route already takes (first match wins).
 * Exact for literals, `*` alone and prefix or suffix wildcards (`payment.*`, `*.created`); other patterns are
 * compared as conservatively as can be (a route is called shadowed only when it certainly is).
 */
function checkReachable(routes: readonly RouteSetting[], variable: string) {
  routes.forEach((route, index) => {
    for (let earlier = 0; earlier < index; earlier++) {
      const before = routes[earlier]?.match ?? {};
      if (!covers(before.aggregateType, route.match.aggregateType)) continue;
      if (!covers(before.eventType, route.match.eventType)) continue;
      const at = `${variable}[${index}]`;
      const other = `${variable}[${earlier}]`;
      if (covers(before.aggregateType, undefined) && covers(before.eventType, undefined)) {
        throw new ConfigError(
          `${at} is unreachable: ${other} before it matches every event (a catch-all must be the last route)`,
        );
      }
      if (sameMatch(before, route.match)) {
        throw new ConfigError(`${at} duplicates the match of ${other}: it can never be reached`);
      }
      throw new ConfigError(
        `${at} is unreachable: every event it matches is taken first by ${other} (first match wins; put the ` +
          "narrower route first)",
      );
    }
  });
}

/** Whether the patterns `outer` match every value the patterns `inner` match (undefined: every value). */
function covers(outer: readonly string[] | undefined, inner: readonly string[] | undefined): boolean {
  if (outer === undefined || outer.some(isWildcardOnly)) return true;
  if (inner === undefined) return false;
  return inner.every((pattern) => outer.some((wider) => patternCovers(wider, pattern)));
}

function patternCovers(wider: string, narrower: string): boolean {
  if (wider === narrower || isWildcardOnly(wider)) return true;
  if (!narrower.includes("*")) return globRegExp(wider).test(narrower);
  const star = wider.indexOf("*");
  if (star === wider.length - 1 && !wider.slice(0, -1).includes("*")) {
    // `prefix*` takes every value of a pattern that starts with that prefix literally.
    const literal = narrower.slice(0, narrower.indexOf("*"));
    return literal.startsWith(wider.slice(0, -1));
  }
  if (star === 0 && !wider.slice(1).includes("*")) {
    const literal = narrower.slice(narrower.lastIndexOf("*") + 1);
    return literal.endsWith(wider.slice(1));
  }
  return false;
}

function sameMatch(a: RouteMatch, b: RouteMatch): boolean {
  const same = (x?: readonly string[], y?: readonly string[]) =>
    (x === undefined && y === undefined) ||
    (x !== undefined && y !== undefined && x.length === y.length && x.every((p) => y.includes(p)));
  return same(a.aggregateType, b.aggregateType) && same(a.eventType, b.eventType);
}

function isWildcardOnly(pattern: string): boolean {
  return /^\*+$/.test(pattern);
}

/** `*` matches any run of characters (none included); everything else literally. */
export function globRegExp(pattern: string): RegExp {
  const body = pattern
    .split("*")
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
    .join(".*");
  return new RegExp(`^${body}$`, "s");
}

/** A route's match as a predicate over an event's aggregate_type and event_type. */
export function compileMatch(match: RouteMatch): (aggregateType: string, eventType: string) => boolean {
  const field = (patterns?: readonly string[]) => {
    if (patterns === undefined || patterns.some(isWildcardOnly)) return () => true;
    const literals = new Set(patterns.filter((pattern) => !pattern.includes("*")));
    const globs = patterns.filter((pattern) => pattern.includes("*")).map(globRegExp);
    return (value: string) => literals.has(value) || globs.some((glob) => glob.test(value));
  };
  const aggregateType = field(match.aggregateType);
  const eventType = field(match.eventType);
  return (type, event) => aggregateType(type) && eventType(event);
}

function object(value: unknown, at: string): Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new ConfigError(`${at} must be an object, got ${typeName(value)}`);
  }
  return value as Record<string, unknown>;
}

function unknownFields(value: Record<string, unknown>, allowed: readonly string[], at: string) {
  for (const field of Object.keys(value)) {
    if (!allowed.includes(field)) {
      throw new ConfigError(`${at}.${field}: unknown field (it takes ${allowed.join(", ")})`);
    }
  }
}

function text(value: unknown, at: string): string {
  if (typeof value !== "string" || value.trim() === "") {
    throw new ConfigError(`${at} must be a non-empty string, got ${JSON.stringify(value) ?? "nothing"}`);
  }
  return value;
}

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}
