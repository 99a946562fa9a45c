/**
 * The EventBridge half of the in-process endpoint (server.ts routes every `AWSEvents.*` request here, so
 * one URL serves both services, as moto and LocalStack do, and the server's request faults — latency,
 * throttling, failed requests, down — apply to PutEvents too). It speaks the AWS JSON 1.1 shapes the
 * `EventBridgeClient` sends: buses, rules with an event pattern, SQS targets, and PutEvents with per-entry
 * results. Matched events are delivered to their target queues inside the same fake, so a test or the demo
 * reads them back exactly as from real EventBridge (the event JSON as the body, TraceHeader as AWSTraceHeader).
 *
 * Modelled: ≤ 10 entries and < 1 MB per request (entry size as the EventBridge user guide counts it),
 * Source/DetailType/Detail required per entry (InvalidArgument), Detail a JSON object (MalformedDetail),
 * unknown bus (ResourceNotFoundException), and injected entry failures. Event patterns: exact values, nested
 * objects and the `prefix` operator only. Not modelled: archives, replays, input transformers, other targets.
 */

import { randomUUID } from "node:crypto";
import { ACCOUNT, REGION } from "./account.ts";
import { ServiceError } from "./serviceError.ts";

const MAX_ENTRIES = 10;
const MAX_REQUEST_BYTES = 1_048_575;

/** An error the fake server answers with: `code` becomes the JSON 1.1 `__type` the SDK maps to an exception. */
export class EventsError extends ServiceError {}

/** A PutEvents entry as received (Time is epoch seconds on the wire). */
export interface EventEntry {
  Source?: string;
  DetailType?: string;
  Detail?: string;
  Resources?: string[];
  EventBusName?: string;
  Time?: number;
  TraceHeader?: string;
}

export interface EventEntryFailure {
  code: string;
  message?: string;
}

/** One accepted event, in arrival order. */
export interface PublishedEvent {
  bus: string;
  eventId: string;
  source: string;
  detailType: string;
  detail: string;
  traceHeader: string | undefined;
  at: number;
}

export interface EventBridgeStats {
  acceptedEvents: number;
  failedEntries: number;
  /** Matched events a target queue refused (queue deleted, ...): lost, as real EventBridge would without a DLQ. */
  failedDeliveries: number;
}

/** Sends one event to an SQS target; the fake SQS server provides it. */
export type DeliverToQueue = (
  queueName: string,
  body: string,
  options: { groupId?: string; dedupId: string; traceHeader?: string },
) => void;

interface Target {
  id: string;
  queueName: string;
  groupId: string | undefined;
}

interface Rule {
  name: string;
  pattern: Record<string, unknown>;
  targets: Map<string, Target>;
}

export class EventBridgeService {
  readonly stats: EventBridgeStats = { acceptedEvents: 0, failedEntries: 0, failedDeliveries: 0 };
  /** Fails single entries (after validation): return an error code to report for that entry. */
  failEntry: false | ((entry: EventEntry, bus: string) => false | EventEntryFailure) = false;
  private readonly buses = new Map<string, Map<string, Rule>>([["default", new Map()]]);
  private log: PublishedEvent[] = [];
  private readonly deliver: DeliverToQueue;

  constructor(deliver: DeliverToQueue) {
    this.deliver = deliver;
  }

  events(bus?: string): PublishedEvent[] {
    return bus === undefined ? [...this.log] : this.log.filter((event) => event.bus === bus);
  }

  clearEvents(): void {
    this.log = [];
  }

  reset(): void {
    this.failEntry = false;
    Object.assign(this.stats, { acceptedEvents: 0, failedEntries: 0, failedDeliveries: 0 });
  }

  handle(action: string, input: Record<string, unknown>): unknown {
    switch (action) {
      case "CreateEventBus": {
        const name = requiredString(input, "Name");
        if (this.buses.has(name))
          throw new EventsError("ResourceAlreadyExistsException", `Event bus ${name} already exists.`);
        this.buses.set(name, new Map());
        return { EventBusArn: busArn(name) };
      }
      case "DeleteEventBus":
        this.buses.delete(requiredString(input, "Name"));
        return {};
      case "PutRule": {
        const rules = this.bus(input.EventBusName);
        const name = requiredString(input, "Name");
        const pattern = parsePattern(requiredString(input, "EventPattern"));
        const existing = rules.get(name);
        rules.set(name, { name, pattern, targets: existing?.targets ?? new Map() });
        return { RuleArn: `arn:aws:events:${REGION}:${ACCOUNT}:rule/${name}` };
      }
      case "PutTargets":
        return this.putTargets(input);
      case "PutEvents":
        return this.putEvents(input);
      default:
        throw new EventsError(
          "UnknownOperationException",
          `The fake does not implement ${action || "(none)"}.`,
        );
    }
  }

  private bus(nameOrArn: unknown): Map<string, Rule> {
    const name = busName(nameOrArn);
    const rules = this.buses.get(name);
    if (rules === undefined)
      throw new EventsError("ResourceNotFoundException", `Event bus ${name} does not exist.`);
    return rules;
  }

  private putTargets(input: Record<string, unknown>): unknown {
    const rules = this.bus(input.EventBusName);
    const ruleName = requiredString(input, "Rule");
    const rule = rules.get(ruleName);
    if (rule === undefined)
      throw new EventsError("ResourceNotFoundException", `Rule ${ruleName} does not exist.`);
    const targets = Array.isArray(input.Targets) ? (input.Targets as Record<string, unknown>[]) : [];
    for (const target of targets) {
      const arn = String(target.Arn ?? "");
      const queue = /^arn:aws:sqs:[^:]+:\d{12}:(.+)$/.exec(arn)?.[1];
      if (queue === undefined)
        throw new EventsError("ValidationException", `Only SQS targets are faked, got ${arn}.`);
      const parameters = target.SqsParameters as { MessageGroupId?: string } | undefined;
      rule.targets.set(String(target.Id), {
        id: String(target.Id),
        queueName: queue,
        groupId: parameters?.MessageGroupId,
      });
    }
    return { FailedEntryCount: 0, FailedEntries: [] };
  }

  private putEvents(input: Record<string, unknown>): unknown {
    const entries = Array.isArray(input.Entries) ? (input.Entries as EventEntry[]) : [];
    if (entries.length === 0 || entries.length > MAX_ENTRIES) {
      throw new EventsError(
        "ValidationException",
        `1 validation error detected: Value at 'entries' failed to satisfy constraint: Member must have length less than or equal to ${MAX_ENTRIES}`,
      );
    }
    const total = entries.reduce((sum, entry) => sum + entrySize(entry), 0);
    if (total > MAX_REQUEST_BYTES) {
      throw new EventsError(
        "ValidationException",
        "Total size of the entries in the request is over the limit.",
      );
    }
    const results = entries.map((entry) => this.putEvent(entry));
    const failed = results.filter((result) => "ErrorCode" in result).length;
    this.stats.failedEntries += failed;
    return { FailedEntryCount: failed, Entries: results };
  }

  private putEvent(entry: EventEntry): Record<string, string> {
    if (!entry.Source || !entry.DetailType || entry.Detail === undefined) {
      return {
        ErrorCode: "InvalidArgument",
        ErrorMessage: "Parameters Source, DetailType and Detail are required.",
      };
    }
    let detail: unknown;
    try {
      detail = JSON.parse(entry.Detail);
    } catch {
      detail = undefined;
    }
    if (detail === null || typeof detail !== "object" || Array.isArray(detail)) {
      return { ErrorCode: "MalformedDetail", ErrorMessage: "Detail is malformed." };
    }
    const name = busName(entry.EventBusName);
    const rules = this.buses.get(name);
    if (rules === undefined) {
      return { ErrorCode: "ResourceNotFoundException", ErrorMessage: `Event bus ${name} does not exist.` };
    }
    const injected = this.failEntry ? this.failEntry(entry, name) : false;
    if (injected)
      return { ErrorCode: injected.code, ErrorMessage: injected.message ?? `Injected ${injected.code}` };

    const eventId = randomUUID();
    const event = {
      version: "0",
      id: eventId,
      "detail-type": entry.DetailType,
      source: entry.Source,
      account: ACCOUNT,
      time: new Date((entry.Time ?? Date.now() / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, "Z"),
      region: REGION,
      resources: entry.Resources ?? [],
      detail,
    };
    this.stats.acceptedEvents++;
    this.log.push({
      bus: name,
      eventId,
      source: entry.Source,
      detailType: entry.DetailType,
      detail: entry.Detail,
      traceHeader: entry.TraceHeader,
      at: Date.now(),
    });
    for (const rule of rules.values()) {
      if (!matches(rule.pattern, event)) continue;
      const body = JSON.stringify(event);
      for (const target of rule.targets.values()) {
        try {
          this.deliver(target.queueName, body, {
            ...(target.groupId === undefined ? {} : { groupId: target.groupId }),
            dedupId: eventId,
            ...(entry.TraceHeader === undefined ? {} : { traceHeader: entry.TraceHeader }),
          });
        } catch {
          this.stats.failedDeliveries++;
        }
      }
    }
    return { EventId: eventId };
  }
}

/** Entry size as the EventBridge user guide counts it. */
function entrySize(entry: EventEntry): number {
  let size = entry.Time === undefined ? 0 : 14;
  for (const text of [entry.Source, entry.DetailType, entry.Detail, ...(entry.Resources ?? [])]) {
    if (text !== undefined) size += Buffer.byteLength(text);
  }
  return size;
}

function busName(nameOrArn: unknown): string {
  if (typeof nameOrArn !== "string" || nameOrArn === "") return "default";
  const arn = /^arn:aws:events:[^:]+:\d{12}:event-bus\/(.+)$/.exec(nameOrArn);
  return arn?.[1] ?? nameOrArn;
}

function busArn(name: string): string {
  return `arn:aws:events:${REGION}:${ACCOUNT}:event-bus/${name}`;
}

function requiredString(input: Record<string, unknown>, name: string): string {
  const value = input[name];
  if (typeof value !== "string" || value === "") {
    throw new EventsError("ValidationException", `1 validation error detected: ${name} must not be null`);
  }
  return value;
}

function parsePattern(text: string): Record<string, unknown> {
  try {
    const pattern: unknown = JSON.parse(text);
    if (pattern !== null && typeof pattern === "object" && !Array.isArray(pattern)) {
      return pattern as Record<string, unknown>;
    }
  } catch {}
  throw new EventsError("InvalidEventPatternException", "Event pattern is not valid.");
}

/** Every pattern key must match: an array lists accepted values (or `{prefix}`); an object recurses. */
function matches(pattern: Record<string, unknown>, value: unknown): boolean {
  if (value === null || typeof value !== "object") return false;
  const object = value as Record<string, unknown>;
  return Object.entries(pattern).every(([key, expected]) => {
    const actual = object[key];
    if (Array.isArray(expected)) {
      const values = Array.isArray(actual) ? actual : [actual];
      return expected.some((accepted) =>
        values.some((item) =>
          accepted !== null && typeof accepted === "object" && "prefix" in accepted
            ? typeof item === "string" && item.startsWith(String((accepted as { prefix: unknown }).prefix))
            : item === accepted,
        ),
      );
    }
    return (
      expected !== null &&
      typeof expected === "object" &&
      matches(expected as Record<string, unknown>, actual)
    );
  });
}
