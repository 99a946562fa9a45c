/**
 * The SNS part of the in-process endpoint: topics, SQS subscriptions and delivery to them, spoken in the wire
 * protocol `SNSClient` uses (awsQuery: a form-encoded POST with `Action=`, an XML answer; @aws-sdk/client-sns's
 * AwsQueryProtocol). server.ts routes every form-encoded request here, so the server's request faults (latency,
 * throttling, failed requests, down) apply to SNS too, and hands each delivery to the same endpoint's SQS.
 *
 * Modelled (Amazon SNS API Reference, "Publish", "PublishBatch", "Subscribe"; Developer Guide, "Message
 * deduplication for FIFO topics", "Amazon SNS raw message delivery"): ≤ 10 entries (TooManyEntriesInBatchRequest),
 * distinct entry ids (BatchEntryIdsNotDistinct), a FIFO topic's entries need MessageGroupId (InvalidParameter),
 * and a MessageDeduplicationId unless the topic has ContentBasedDeduplication (that entry fails), the sum of the
 * messages ≤ 256 KiB (BatchRequestTooLong), unknown topic (NotFound); a FIFO topic drops a message whose
 * deduplication id (or, content-based, the SHA-256 of its body) it accepted within the window, and passes the
 * group and deduplication ids on to FIFO queues; raw delivery sends the message as the queue message's body with
 * its attributes as SQS message attributes, otherwise the body is the JSON notification. Not modelled: filter
 * policies, other protocols, message structure, signatures (the notification's Signature is not a real one),
 * permissions, a subscription's confirmation (SQS subscriptions are confirmed at once, as within one account).
 */

import { createHash, randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import { ACCOUNT, REGION } from "./account.ts";
import { ServiceError } from "./serviceError.ts";

const MAX_ENTRIES = 10;
const MAX_BATCH_BYTES = 262_144;
const XMLNS = "http://sns.amazonaws.com/doc/2010-03-31/";

/** An error SNS answers a whole request with; `code` is the awsQuery error code the SDK maps to its exception. */
export class SnsError extends ServiceError {}

/** One accepted message, in arrival order (duplicates included, marked). */
export interface PublishedMessage {
  topicArn: string;
  messageId: string;
  message: string;
  groupId: string | undefined;
  dedupId: string | undefined;
  /** String attributes by name (Value.StringValue). */
  attributes: Record<string, string>;
  /** Accepted but not delivered: a FIFO topic saw its deduplication id within the window. */
  duplicate: boolean;
  at: number;
}

/** A message attribute as SQS takes it (BinaryValue in base64, as on SQS's JSON wire). */
export interface QueueAttribute {
  DataType: string;
  StringValue?: string;
  BinaryValue?: string;
}

/** What a subscription hands to a queue: server.ts sends it to the queue named by `queueArn`. */
export type DeliverToQueue = (
  queueArn: string,
  message: {
    body: string;
    groupId: string | undefined;
    dedupId: string | undefined;
    attributes: Record<string, QueueAttribute>;
  },
) => void;

interface Subscription {
  arn: string;
  queueArn: string;
  raw: boolean;
}

interface Topic {
  arn: string;
  fifo: boolean;
  attributes: Record<string, string>;
  subscriptions: Subscription[];
  /** FIFO: deduplication id -> first accepted message; insertion order is arrival order, so expiry pops the front. */
  dedup: Map<string, { at: number; messageId: string; sequenceNumber: string }>;
}

/** A validated entry of Publish or PublishBatch. */
interface Entry {
  message: string;
  subject: string | undefined;
  groupId: string | undefined;
  dedupId: string | undefined;
  attributes: Record<string, QueueAttribute>;
}

export class SnsService {
  readonly #topics = new Map<string, Topic>();
  #published: PublishedMessage[] = [];
  #sequence = 0n;
  readonly #deliver: DeliverToQueue;
  readonly #dedupWindowMs: () => number;

  /** `deliver` sends to the endpoint's queues; `dedupWindowMs` is the endpoint's (live) FIFO window. */
  constructor(deliver: DeliverToQueue = () => {}, dedupWindowMs: () => number = () => 5 * 60_000) {
    this.#deliver = deliver;
    this.#dedupWindowMs = dedupWindowMs;
  }

  handle(action: string, form: Map<string, string>): string {
    switch (action) {
      case "CreateTopic":
        return xmlAnswer(action, `<TopicArn>${this.#createTopic(form)}</TopicArn>`);
      case "GetTopicAttributes": {
        const topic = this.#topic(form.get("TopicArn"));
        const attributes = {
          TopicArn: topic.arn,
          Owner: ACCOUNT,
          DisplayName: "",
          SubscriptionsConfirmed: String(topic.subscriptions.length),
          SubscriptionsPending: "0",
          SubscriptionsDeleted: "0",
          ...topic.attributes,
        };
        const entries = Object.entries(attributes)
          .map(([key, value]) => `<entry><key>${key}</key><value>${escapeXml(value)}</value></entry>`)
          .join("");
        return xmlAnswer(action, `<Attributes>${entries}</Attributes>`);
      }
      case "DeleteTopic":
        this.#topics.delete(form.get("TopicArn") ?? "");
        return xmlAnswer(action, "");
      case "Subscribe":
        return xmlAnswer(action, `<SubscriptionArn>${this.#subscribe(form)}</SubscriptionArn>`);
      case "Unsubscribe": {
        const arn = form.get("SubscriptionArn") ?? "";
        for (const topic of this.#topics.values()) {
          topic.subscriptions = topic.subscriptions.filter((subscription) => subscription.arn !== arn);
        }
        return xmlAnswer(action, "");
      }
      case "Publish": {
        const topic = this.#topic(form.get("TopicArn"));
        if (topic.fifo && form.get("MessageGroupId") === undefined) throw groupIdRequired();
        const entry = this.#entry(topic, form);
        if (entry instanceof SnsError) throw entry;
        const { messageId, sequenceNumber } = this.#publish(topic, entry);
        const sequence =
          sequenceNumber === undefined ? "" : `<SequenceNumber>${sequenceNumber}</SequenceNumber>`;
        return xmlAnswer(action, `<MessageId>${messageId}</MessageId>${sequence}`);
      }
      case "PublishBatch":
        return xmlAnswer(action, this.#publishBatch(form));
      default:
        throw new SnsError("InvalidAction", `The action ${action} is not valid for this endpoint.`);
    }
  }

  published(): PublishedMessage[] {
    return [...this.#published];
  }

  clear(): void {
    this.#published = [];
  }

  #createTopic(form: Map<string, string>): string {
    const name = form.get("Name") ?? "";
    if (!/^[A-Za-z0-9_-]{1,256}(\.fifo)?$/.test(name)) {
      throw new SnsError("InvalidParameter", "Invalid parameter: Topic Name");
    }
    const requested = mapEntries(form, "Attributes");
    const arn = `arn:aws:sns:${REGION}:${ACCOUNT}:${name}`;
    const fifo = name.endsWith(".fifo");
    if (requested.FifoTopic === "true" && !fifo) {
      throw new SnsError("InvalidParameter", "Invalid parameter: Fifo Topic names must end with .fifo");
    }
    const existing = this.#topics.get(arn);
    if (existing === undefined) {
      const attributes: Record<string, string> = fifo
        ? { FifoTopic: "true", ContentBasedDeduplication: "false", ...requested }
        : { ...requested };
      this.#topics.set(arn, { arn, fifo, attributes, subscriptions: [], dedup: new Map() });
    }
    return arn;
  }

  #subscribe(form: Map<string, string>): string {
    const topic = this.#topic(form.get("TopicArn"));
    const protocol = form.get("Protocol");
    const queueArn = form.get("Endpoint") ?? "";
    if (protocol !== "sqs") {
      throw new SnsError(
        "InvalidParameter",
        `Invalid parameter: this local endpoint delivers only to sqs, not ${protocol}`,
      );
    }
    if (!queueArn.startsWith(`arn:aws:sqs:${REGION}:${ACCOUNT}:`)) {
      throw new SnsError("InvalidParameter", "Invalid parameter: SQS endpoint ARN");
    }
    if (!topic.fifo && queueArn.endsWith(".fifo")) {
      throw new SnsError(
        "InvalidParameter",
        "Invalid parameter: Invalid parameter: Endpoint Reason: FIFO SQS Queues can not be subscribed to standard SNS topics",
      );
    }
    const raw = mapEntries(form, "Attributes").RawMessageDelivery === "true";
    // Subscribing the same queue again returns the existing subscription, as SNS does.
    const same = topic.subscriptions.find((subscription) => subscription.queueArn === queueArn);
    if (same !== undefined) return same.arn;
    const subscription = { arn: `${topic.arn}:${randomUUID()}`, queueArn, raw };
    topic.subscriptions.push(subscription);
    return subscription.arn;
  }

  #publishBatch(form: Map<string, string>): string {
    const topic = this.#topic(form.get("TopicArn"));
    const entries = members(form, "PublishBatchRequestEntries.member");
    if (entries.length === 0)
      throw new SnsError("EmptyBatchRequest", "The batch request doesn't contain any entries.");
    if (entries.length > MAX_ENTRIES) {
      throw new SnsError(
        "TooManyEntriesInBatchRequest",
        `The batch request contains more entries than permissible.`,
      );
    }
    if (new Set(entries.map((entry) => entry.get("Id"))).size !== entries.length) {
      throw new SnsError(
        "BatchEntryIdsNotDistinct",
        "Two or more batch entries in the request have the same Id.",
      );
    }
    let bytes = 0;
    for (const entry of entries) {
      if (topic.fifo && entry.get("MessageGroupId") === undefined) throw groupIdRequired();
      bytes += Buffer.byteLength(entry.get("Message") ?? "");
    }
    if (bytes > MAX_BATCH_BYTES) {
      throw new SnsError(
        "BatchRequestTooLong",
        `The length of all the messages put together is more than the limit.`,
      );
    }
    const successful: string[] = [];
    const failed: string[] = [];
    for (const fields of entries) {
      const id = escapeXml(fields.get("Id") ?? "");
      const entry = this.#entry(topic, fields);
      if (entry instanceof SnsError) {
        failed.push(
          `<member><Id>${id}</Id><Code>${entry.code}</Code><Message>${escapeXml(entry.message)}</Message><SenderFault>true</SenderFault></member>`,
        );
        continue;
      }
      const { messageId, sequenceNumber } = this.#publish(topic, entry);
      const sequence =
        sequenceNumber === undefined ? "" : `<SequenceNumber>${sequenceNumber}</SequenceNumber>`;
      successful.push(`<member><Id>${id}</Id><MessageId>${messageId}</MessageId>${sequence}</member>`);
    }
    const list = (name: string, items: string[]) =>
      items.length === 0 ? `<${name}/>` : `<${name}>${items.join("")}</${name}>`;
    return list("Successful", successful) + list("Failed", failed);
  }

  /** An entry's fields, or the error that fails that entry alone. */
  #entry(topic: Topic, fields: Map<string, string>): Entry | SnsError {
    const message = fields.get("Message") ?? "";
    let dedupId = fields.get("MessageDeduplicationId");
    if (topic.fifo && dedupId === undefined) {
      if (topic.attributes.ContentBasedDeduplication !== "true") {
        return new SnsError(
          "InvalidParameter",
          "Invalid parameter: The topic should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
        );
      }
      // Content-based deduplication: the SHA-256 of the body (Developer Guide, "Message deduplication for FIFO topics").
      dedupId = createHash("sha256").update(message).digest("hex");
    }
    if (!topic.fifo && dedupId !== undefined) {
      return new SnsError(
        "InvalidParameter",
        "Invalid parameter: MessageDeduplicationId Reason: The request includes MessageDeduplicationId parameter that is not valid for this topic type",
      );
    }
    const attributes: Record<string, QueueAttribute> = {};
    for (const attribute of members(fields, "MessageAttributes.entry")) {
      const dataType = attribute.get("Value.DataType") ?? "String";
      const binary = attribute.get("Value.BinaryValue");
      attributes[attribute.get("Name") ?? ""] =
        binary === undefined
          ? { DataType: dataType, StringValue: attribute.get("Value.StringValue") ?? "" }
          : { DataType: dataType, BinaryValue: binary };
    }
    return {
      message,
      subject: fields.get("Subject"),
      groupId: fields.get("MessageGroupId"),
      dedupId,
      attributes,
    };
  }

  /** Accepts one message: deduplicated on a FIFO topic, recorded, delivered to every subscription. */
  #publish(topic: Topic, entry: Entry): { messageId: string; sequenceNumber: string | undefined } {
    const at = Date.now();
    let first: { messageId: string; sequenceNumber: string } | undefined;
    let sequenceNumber: string | undefined;
    const messageId = randomUUID();
    if (topic.fifo && entry.dedupId !== undefined) {
      const windowMs = this.#dedupWindowMs();
      for (const [key, seen] of topic.dedup) {
        if (at - seen.at < windowMs) break;
        topic.dedup.delete(key);
      }
      first = topic.dedup.get(entry.dedupId);
      sequenceNumber = String(++this.#sequence).padStart(20, "0");
      if (first === undefined) topic.dedup.set(entry.dedupId, { at, messageId, sequenceNumber });
    }
    const attributes: Record<string, string> = {};
    for (const [name, value] of Object.entries(entry.attributes)) {
      attributes[name] = value.StringValue ?? value.BinaryValue ?? "";
    }
    this.#published.push({
      topicArn: topic.arn,
      messageId: first?.messageId ?? messageId,
      message: entry.message,
      groupId: entry.groupId,
      dedupId: entry.dedupId,
      attributes,
      duplicate: first !== undefined,
      at,
    });
    // A duplicate is accepted (answered as the first one) and not delivered again.
    if (first !== undefined) return first;
    for (const subscription of topic.subscriptions) {
      const toFifo = subscription.queueArn.endsWith(".fifo");
      this.#deliver(subscription.queueArn, {
        body: subscription.raw
          ? entry.message
          : notification(topic, entry, messageId, sequenceNumber, subscription.arn, at),
        groupId: toFifo ? entry.groupId : undefined,
        dedupId: toFifo ? entry.dedupId : undefined,
        attributes: subscription.raw ? entry.attributes : {},
      });
    }
    return { messageId, sequenceNumber };
  }

  #topic(arn: string | undefined): Topic {
    const topic = this.#topics.get(arn ?? "");
    if (topic === undefined) throw new SnsError("NotFound", "Topic does not exist", 404);
    return topic;
  }
}

function groupIdRequired(): SnsError {
  return new SnsError(
    "InvalidParameter",
    "Invalid parameter: The MessageGroupId parameter is required for FIFO topics",
  );
}

/**
 * The JSON notification SNS sends a subscription without raw delivery (Developer Guide, "Parsing message
 * formats": Type, MessageId, SequenceNumber for FIFO, TopicArn, Subject, Message, Timestamp, the signature
 * fields, UnsubscribeURL, MessageAttributes as {Type, Value}).
 */
function notification(
  topic: Topic,
  entry: Entry,
  messageId: string,
  sequenceNumber: string | undefined,
  subscriptionArn: string,
  at: number,
): string {
  const attributes: Record<string, { Type: string; Value: string }> = {};
  for (const [name, value] of Object.entries(entry.attributes)) {
    attributes[name] = { Type: value.DataType, Value: value.StringValue ?? value.BinaryValue ?? "" };
  }
  return JSON.stringify({
    Type: "Notification",
    MessageId: messageId,
    ...(sequenceNumber === undefined ? {} : { SequenceNumber: sequenceNumber }),
    TopicArn: topic.arn,
    ...(entry.subject === undefined ? {} : { Subject: entry.subject }),
    Message: entry.message,
    Timestamp: new Date(at).toISOString(),
    SignatureVersion: "1",
    Signature: "bG9jYWwgZW5kcG9pbnQ6IG5vdCBzaWduZWQ=",
    SigningCertURL: `https://sns.${REGION}.amazonaws.com/SimpleNotificationService-local.pem`,
    UnsubscribeURL: `https://sns.${REGION}.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=${subscriptionArn}`,
    ...(Object.keys(attributes).length === 0 ? {} : { MessageAttributes: attributes }),
  });
}

/** A request's form fields, as the SDK's awsQuery serializer flattens them (`A.member.1.B=...`). */
export function parseForm(raw: Buffer): Map<string, string> {
  return new Map(new URLSearchParams(raw.toString("utf8")));
}

/** A map parameter as awsQuery flattens it: `<prefix>.entry.N.key` / `.value`. */
function mapEntries(form: Map<string, string>, prefix: string): Record<string, string> {
  const map: Record<string, string> = {};
  for (const entry of members(form, `${prefix}.entry`))
    map[entry.get("key") ?? ""] = entry.get("value") ?? "";
  return map;
}

/** The numbered members under `prefix` (`prefix.1.X`, `prefix.2.X`, ...), each as its own field map. */
function members(form: Map<string, string>, prefix: string): Map<string, string>[] {
  const byIndex = new Map<number, Map<string, string>>();
  for (const [key, value] of form) {
    if (!key.startsWith(`${prefix}.`)) continue;
    const rest = key.slice(prefix.length + 1);
    const dot = rest.indexOf(".");
    const index = Number(rest.slice(0, dot));
    if (!Number.isInteger(index)) continue;
    const member = byIndex.get(index) ?? new Map<string, string>();
    byIndex.set(index, member);
    member.set(rest.slice(dot + 1), value);
  }
  return [...byIndex].sort((a, b) => a[0] - b[0]).map(([, member]) => member);
}

function xmlAnswer(action: string, result: string): string {
  return (
    `<${action}Response xmlns="${XMLNS}"><${action}Result>${result}</${action}Result>` +
    `<ResponseMetadata><RequestId>${randomUUID()}</RequestId></ResponseMetadata></${action}Response>`
  );
}

const escapeXml = (text: string) =>
  text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll('"', "&quot;");

export function writeSnsOutput(res: ServerResponse, xml: string): void {
  respondXml(res, 200, xml);
}

/** awsQuery's error document: the SDK reads Error/Code and maps it to the modelled exception of that name. */
export function writeSnsError(res: ServerResponse, code: string, message: string, status: number): void {
  const type = status >= 500 ? "Receiver" : "Sender";
  respondXml(
    res,
    status,
    `<ErrorResponse xmlns="${XMLNS}"><Error><Type>${type}</Type><Code>${escapeXml(code)}</Code>` +
      `<Message>${escapeXml(message)}</Message></Error><RequestId>${randomUUID()}</RequestId></ErrorResponse>`,
  );
}

function respondXml(res: ServerResponse, status: number, xml: string): void {
  if (res.destroyed || res.headersSent) return;
  res.writeHead(status, {
    "content-type": "text/xml",
    "content-length": Buffer.byteLength(xml),
    "x-amzn-requestid": randomUUID(),
  });
  res.end(xml);
}
