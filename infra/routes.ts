import { Stack, Token } from "aws-cdk-lib";
import type * as events from "aws-cdk-lib/aws-events";
import * as iam from "aws-cdk-lib/aws-iam";
import type * as kinesis from "aws-cdk-lib/aws-kinesis";
import type * as kms from "aws-cdk-lib/aws-kms";
import type * as sns from "aws-cdk-lib/aws-sns";
import * as sqs from "aws-cdk-lib/aws-sqs";
import type { IConstruct } from "constructs";
import { EVENTBRIDGE_MAX_REQUEST_BYTES } from "../functions/shared/destinations/eventBridge/eventBridge.ts";
import { KINESIS_MAX_RECORD_BYTES } from "../functions/shared/destinations/kinesis/kinesis.ts";
import type { PlaceLimit } from "../functions/shared/destinations/limits.ts";
import { parseRoutes } from "../functions/shared/destinations/routing/routes.ts";
import {
  SNS_MAX_MESSAGE_BYTES,
  SNS_MAX_TOPIC_MESSAGE_BYTES,
} from "../functions/shared/destinations/sns/sns.ts";
import { SQS_MAX_MESSAGE_BYTES } from "../functions/shared/destinations/sqs/limits.ts";
import type { TargetSetting } from "../functions/shared/destinations/targets.ts";
import type { EndpointService } from "./network.ts";

/** What a route can publish to: a queue (FIFO or standard), a topic (FIFO or standard), a stream or a bus. */
export type RouteDestination = sqs.IQueue | sns.ITopic | kinesis.IStream | events.IEventBus;

/** A pattern (`*` matches any run of characters) or a list of them; left out, every value matches. */
export type RoutePattern = string | readonly string[];

export interface OutboxRoute {
  readonly match: { readonly aggregateType?: RoutePattern; readonly eventType?: RoutePattern };
  readonly destination: RouteDestination;
  /**
   * A queue's or topic's MaximumMessageSize, for one the construct cannot read: an imported queue (default: the
   * attribute's default, 262,144, with a synth warning), a topic (default SNS's 262,144). A queue created in this
   * app is read from its template. The relay sends up to it and the write API refuses what would not fit
   * (docs/large-payloads.md, "Limits"); the relay's cold start checks a queue really takes it. Not for a stream
   * or a bus, whose limits are fixed.
   */
  readonly maxMessageBytes?: number;
}

/** One distinct place the routes publish to, as the construct grants, alarms and graphs it. */
export interface RoutedPlace {
  target: RouteDestination;
  kind: TargetSetting["kind"];
  service: EndpointService;
  /**
   * The relay's `destination` metric dimension for it, `<kind>:<name>` (targetName in
   * functions/shared/destinations/targets.ts), with the name as a token when CloudFormation makes it.
   */
  metricName: string;
  /** A construct-id-safe label for its alarms: the target's own construct id. */
  label: string;
}

export interface ResolvedRoutes {
  /** OUTBOX_ROUTES: the JSON the relay parses, tokens (a created queue's URL) resolved by CloudFormation. */
  json: string;
  /** Each distinct destination once, in order of first use. */
  places: RoutedPlace[];
  /** The largest message any route's destination takes: what the relay's memory is sized for. */
  maxMessageBytes: number;
  /** Each route's destination and its limit, for the write API's limit (destinations/limits.ts). */
  limits: PlaceLimit[];
  /** Routes to a queue whose size the construct could not read nor was told: `routes[i]` and the queue. */
  unknownSizes: string[];
}

/** What an existing queue most likely has when nobody raised it: the MaximumMessageSize attribute's default. */
export const SQS_DEFAULT_MESSAGE_BYTES = 262_144;
/**
 * The `routes` prop as the relay's OUTBOX_ROUTES, checked at synth by the relay's own parser
 * (routing/routes.ts), so `cdk synth` and the relay's cold start refuse the same tables with the same words:
 * an unreachable or duplicate route, a FIFO queue or topic that is not `.fifo` (or the reverse), a malformed
 * pattern. Names a CloudFormation makes (a queue created in this app) are unknown at synth: the check then sees a
 * placeholder of the same kind (a `.fifo` name for a FIFO one), so the route's shape is checked, and the relay's
 * cold start checks the real one.
 */
export function resolveRoutes(
  scope: IConstruct,
  routes: readonly OutboxRoute[],
  eventSource: string | undefined,
): ResolvedRoutes {
  const stack = Stack.of(scope);
  const wire: Record<string, unknown>[] = [];
  const probe: Record<string, unknown>[] = [];
  const places: RoutedPlace[] = [];
  let maxMessageBytes = 0;
  const limits: PlaceLimit[] = [];
  const unknownSizes: string[] = [];
  routes.forEach((route, index) => {
    const place = describe(route.destination);
    const size = routeMessageBytes(route, place.kind, `routes[${index}]`);
    if (!size.known) unknownSizes.push(`routes[${index}] (${route.destination.node.path})`);
    const destination = destinationJson(route.destination, place.kind, eventSource, size.bytes);
    const match = matchJson(route.match);
    wire.push({ match, destination });
    probe.push({ match, destination: placeholder(destination, index) });
    if (!places.some((known) => known.target === route.destination)) places.push(place);
    maxMessageBytes = Math.max(maxMessageBytes, size.bytes);
    limits.push({
      kind: place.kind,
      maxMessageBytes: size.bytes,
      name: limitName(place.kind, route.destination),
    });
  });
  const probeJson = JSON.stringify(probe);
  try {
    parseRoutes(probeJson, "routes");
  } catch (error) {
    throw new Error(`OutboxRelay ${(error as Error).message}`, { cause: error });
  }
  // Its size is checked with the rest of the relay's environment, at the longest names (infra/environmentSize.ts).
  labelUniquely(places);
  return { json: stack.toJsonString(wire), places, maxMessageBytes, limits, unknownSizes };
}

function describe(target: RouteDestination): RoutedPlace {
  const label = target.node.id.replace(/[^A-Za-z0-9]/g, "");
  if (isBus(target)) {
    return {
      target,
      kind: "eventbridge",
      service: "events",
      metricName: `eventbridge:${target.eventBusName}`,
      label,
    };
  }
  if (isStream(target)) {
    return { target, kind: "kinesis", service: "kinesis", metricName: `kinesis:${target.streamName}`, label };
  }
  if (isTopic(target)) {
    const kind = target.fifo ? "sns-fifo" : "sns";
    return { target, kind, service: "sns", metricName: `${kind}:${target.topicName}`, label };
  }
  const kind = target.fifo ? "sqs-fifo" : "sqs";
  return { target, kind, service: "sqs", metricName: `${kind}:${target.queueName}`, label };
}

function destinationJson(
  target: RouteDestination,
  kind: TargetSetting["kind"],
  eventSource: string | undefined,
  maxMessageBytes: number,
): Record<string, unknown> {
  if (isBus(target)) {
    // The ARN, not the name: it also names a bus in another account.
    return {
      kind,
      busName: target.eventBusArn,
      ...(eventSource === undefined ? {} : { source: eventSource }),
    };
  }
  if (isStream(target)) return { kind, streamArn: target.streamArn };
  if (isTopic(target)) {
    return maxMessageBytes === SNS_MAX_MESSAGE_BYTES
      ? { kind, topicArn: target.topicArn }
      : { kind, topicArn: target.topicArn, maxMessageBytes };
  }
  return { kind, queueUrl: target.queueUrl, maxMessageBytes };
}

/** The route's destination with each name CloudFormation makes replaced by a well-formed one of its kind. */
function placeholder(destination: Record<string, unknown>, index: number): Record<string, unknown> {
  const suffix = String(destination.kind).endsWith("-fifo") ? ".fifo" : "";
  const name = `route${index}${suffix}`;
  const stand: Record<string, string> = {
    queueUrl: `https://sqs.us-east-1.amazonaws.com/123456789012/${name}`,
    topicArn: `arn:aws:sns:us-east-1:123456789012:${name}`,
    streamArn: `arn:aws:kinesis:us-east-1:123456789012:stream/${name}`,
    busName: `arn:aws:events:us-east-1:123456789012:event-bus/${name}`,
  };
  return Object.fromEntries(
    Object.entries(destination).map(([field, value]) => [
      field,
      typeof value === "string" && Token.isUnresolved(value) ? (stand[field] ?? value) : value,
    ]),
  );
}

function matchJson(match: OutboxRoute["match"]): Record<string, unknown> {
  const json: Record<string, unknown> = {};
  if (match.aggregateType !== undefined) json.aggregateType = match.aggregateType;
  if (match.eventType !== undefined) json.eventType = match.eventType;
  return json;
}

/**
 * What a queue takes, as its template says: a queue of this app (created with `new sqs.Queue`, here or anywhere
 * in the app) shows its MaximumMessageSize, or none, which is SQS's attribute default, 262,144 (`known`). An
 * imported queue (`fromQueueArn`) shows nothing: the attribute's default is assumed, not known.
 */
export function queueMessageBytes(queue: sqs.IQueue): { bytes: number; known: boolean } {
  const cfn = queue.node.defaultChild;
  if (!(cfn instanceof sqs.CfnQueue)) return { bytes: SQS_DEFAULT_MESSAGE_BYTES, known: false };
  const size = cfn.maximumMessageSize;
  if (size === undefined) return { bytes: SQS_DEFAULT_MESSAGE_BYTES, known: true };
  return typeof size === "number" && !Token.isUnresolved(size)
    ? { bytes: size, known: true }
    : { bytes: SQS_DEFAULT_MESSAGE_BYTES, known: false };
}

/** A route's limit: its prop, else its queue's template, else the destination's own (fixed or default) limit. */
function routeMessageBytes(
  route: OutboxRoute,
  kind: TargetSetting["kind"],
  at: string,
): { bytes: number; known: boolean } {
  const given = route.maxMessageBytes;
  if (kind === "eventbridge" || kind === "kinesis") {
    if (given !== undefined) {
      throw new Error(
        `OutboxRelay ${at}.maxMessageBytes applies to a queue or a topic; a ${kind === "kinesis" ? "stream's" : "bus's"} limit is fixed`,
      );
    }
    return {
      bytes: kind === "kinesis" ? KINESIS_MAX_RECORD_BYTES : EVENTBRIDGE_MAX_REQUEST_BYTES,
      known: true,
    };
  }
  const max = kind === "sns" || kind === "sns-fifo" ? SNS_MAX_TOPIC_MESSAGE_BYTES : SQS_MAX_MESSAGE_BYTES;
  if (given !== undefined) {
    if (!Number.isInteger(given) || given < 1024 || given > max) {
      throw new Error(
        `OutboxRelay ${at}.maxMessageBytes must be an integer from 1024 to ${max}, got ${given}`,
      );
    }
    return { bytes: given, known: true };
  }
  if (kind === "sns" || kind === "sns-fifo") return { bytes: SNS_MAX_MESSAGE_BYTES, known: true };
  return queueMessageBytes(route.destination as sqs.IQueue);
}

/**
 * The place's name in the write API's refusal (`sqs-fifo:orders.fifo`): a literal name, else the construct's
 * path. Never a token: the migrations resource, which writes it, must not depend on the destinations.
 */
export function limitName(
  kind: TargetSetting["kind"],
  target: IConstruct & { queueName?: string; topicName?: string; streamName?: string; eventBusName?: string },
): string {
  const name = target.queueName ?? target.topicName ?? target.streamName ?? target.eventBusName;
  return `${kind}:${name === undefined || Token.isUnresolved(name) ? target.node.path : name}`;
}

/** Two destinations with the same construct id (in different scopes) get their index appended. */
function labelUniquely(places: RoutedPlace[]): void {
  const seen = new Set<string>();
  places.forEach((place, index) => {
    if (seen.has(place.label) || place.label === "") place.label = `${place.label}${index}`;
    seen.add(place.label);
  });
}

/**
 * What the relay may do on each routed destination, nothing more: SendMessage (which authorizes
 * SendMessageBatch) and GetQueueAttributes (the cold-start check) per queue; Publish (which authorizes
 * PublishBatch) and GetTopicAttributes per topic; PutRecords and DescribeStreamSummary per stream; PutEvents per
 * bus. A customer-managed key is usable only through its service (kms:ViaService): SQS and SNS encrypt with the
 * caller's GenerateDataKey and Decrypt (SQS and SNS developer guides, "Key management"), Kinesis producers need
 * GenerateDataKey (Kinesis developer guide, "Permissions to use user-generated KMS keys"). An EventBridge bus
 * with a customer key is authorized by the key's policy for EventBridge, not by the caller's role.
 */
export function grantRoutes(places: readonly RoutedPlace[], role: iam.IRole): void {
  for (const { target } of places) {
    if (isBus(target)) {
      allow(role, ["events:PutEvents"], target.eventBusArn);
    } else if (isStream(target)) {
      allow(role, ["kinesis:PutRecords", "kinesis:DescribeStreamSummary"], target.streamArn);
      if (target.encryptionKey !== undefined) {
        role.addToPrincipalPolicy(
          viaService(target.encryptionKey, "kinesis", target, ["kms:GenerateDataKey"]),
        );
      }
    } else if (isTopic(target)) {
      allow(role, ["sns:Publish", "sns:GetTopicAttributes"], target.topicArn);
      if (target.masterKey !== undefined)
        role.addToPrincipalPolicy(viaService(target.masterKey, "sns", target));
    } else {
      allow(role, ["sqs:SendMessage", "sqs:GetQueueAttributes"], target.queueArn);
      const key = target.encryptionMasterKey;
      if (key !== undefined) role.addToPrincipalPolicy(viaService(key, "sqs", target));
    }
  }
}

function allow(role: iam.IRole, actions: string[], resource: string): void {
  role.addToPrincipalPolicy(new iam.PolicyStatement({ actions, resources: [resource] }));
}

/**
 * The key's data-key actions for requests its service makes on the caller's behalf only: the role cannot use
 * the key directly, for anything else it protects. In the role's policy, not the key's, so a key from another
 * stack or account needs no change beyond trusting the account's IAM policies (the default key policy does).
 */
export function viaService(
  key: kms.IKey,
  service: EndpointService,
  resource: IConstruct,
  actions: string[] = ["kms:GenerateDataKey", "kms:Decrypt"],
): iam.PolicyStatement {
  const { region, urlSuffix } = Stack.of(resource);
  return new iam.PolicyStatement({
    actions,
    resources: [key.keyArn],
    conditions: { StringEquals: { "kms:ViaService": `${service}.${region}.${urlSuffix}` } },
  });
}

/**
 * The services whose interface endpoint the relay needs (withServiceEndpoints): each route's, and a default bus's.
 * Not a default queue's: its SQS endpoint is one of `vpcEndpoints` (the construct has always asked for it), and
 * it serves the queue routes too.
 */
export function endpointServices(
  defaultKind: "sqs-fifo" | "eventbridge" | undefined,
  routes: ResolvedRoutes | undefined,
): Set<EndpointService> {
  const services = new Set<EndpointService>(defaultKind === "eventbridge" ? ["events"] : []);
  for (const place of routes?.places ?? []) {
    if (!(place.service === "sqs" && defaultKind === "sqs-fifo")) services.add(place.service);
  }
  return services;
}

export function isBus(target: RouteDestination): target is events.IEventBus {
  return "eventBusArn" in target;
}

function isStream(target: RouteDestination): target is kinesis.IStream {
  return "streamArn" in target;
}

function isTopic(target: RouteDestination): target is sns.ITopic {
  return "topicArn" in target;
}
