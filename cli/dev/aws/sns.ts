/**
 * The SNS half of the in-process endpoint, as small as the relay's SNS destination needs: CreateTopic and
 * PublishBatch, spoken in the wire protocol `SNSClient` uses (awsQuery: a form-encoded POST with `Action=`, an XML
 * answer; @aws-sdk/client-sns's AwsQueryProtocol). server.ts routes every form-encoded request here, so the
 * server's request faults (latency, throttling, failed requests, down) apply to SNS too.
 *
 * Modelled (Amazon SNS API Reference, "PublishBatch"): ≤ 10 entries (TooManyEntriesInBatchRequest), distinct
 * entry ids (BatchEntryIdsNotDistinct), a FIFO topic's entries need MessageGroupId (InvalidParameter), the sum
 * of the messages ≤ 256 KiB (BatchRequestTooLong), unknown topic (NotFound). Not modelled: subscriptions and
 * delivery, FIFO deduplication, message size per attribute, Publish, permissions.
 */

import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import { ACCOUNT, REGION } from "./account.ts";
import { ServiceError } from "./serviceError.ts";

const MAX_ENTRIES = 10;
const MAX_BATCH_BYTES = 262_144;
const XMLNS = "http://sns.amazonaws.com/doc/2010-03-31/";

/** An error SNS answers a whole request with; `code` is the awsQuery error code the SDK maps to its exception. */
export class SnsError extends ServiceError {}

/** One accepted message, in arrival order. */
export interface PublishedMessage {
  topicArn: string;
  messageId: string;
  message: string;
  groupId: string | undefined;
  dedupId: string | undefined;
  /** String attributes by name (Value.StringValue). */
  attributes: Record<string, string>;
  at: number;
}

/** A request's form fields, as the SDK's awsQuery serializer flattens them (`A.member.1.B=...`). */
export function parseForm(raw: Buffer): Map<string, string> {
  return new Map(new URLSearchParams(raw.toString("utf8")));
}

export class SnsService {
  readonly #topics = new Set<string>();
  #published: PublishedMessage[] = [];
  #sequence = 0n;

  handle(action: string, form: Map<string, string>): string {
    switch (action) {
      case "CreateTopic": {
        const name = form.get("Name") ?? "";
        if (!/^[A-Za-z0-9_-]{1,256}(\.fifo)?$/.test(name)) {
          throw new SnsError("InvalidParameter", "Invalid parameter: Topic Name");
        }
        const arn = `arn:aws:sns:${REGION}:${ACCOUNT}:${name}`;
        this.#topics.add(arn);
        return xmlAnswer(action, `<TopicArn>${arn}</TopicArn>`);
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

  #publishBatch(form: Map<string, string>): string {
    const topicArn = form.get("TopicArn") ?? "";
    if (!this.#topics.has(topicArn)) throw new SnsError("NotFound", "Topic does not exist", 404);
    const fifo = topicArn.endsWith(".fifo");
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
      if (fifo && entry.get("MessageGroupId") === undefined) {
        throw new SnsError(
          "InvalidParameter",
          "Invalid parameter: The MessageGroupId parameter is required for FIFO topics",
        );
      }
      bytes += Buffer.byteLength(entry.get("Message") ?? "");
    }
    if (bytes > MAX_BATCH_BYTES) {
      throw new SnsError(
        "BatchRequestTooLong",
        `The length of all the messages put together is more than the limit.`,
      );
    }
    const at = Date.now();
    const successful = entries.map((entry) => {
      const attributes: Record<string, string> = {};
      for (const attribute of members(entry, "MessageAttributes.entry")) {
        attributes[attribute.get("Name") ?? ""] = attribute.get("Value.StringValue") ?? "";
      }
      const messageId = randomUUID();
      this.#published.push({
        topicArn,
        messageId,
        message: entry.get("Message") ?? "",
        groupId: entry.get("MessageGroupId"),
        dedupId: entry.get("MessageDeduplicationId"),
        attributes,
        at,
      });
      const sequence = fifo
        ? `<SequenceNumber>${String(++this.#sequence).padStart(20, "0")}</SequenceNumber>`
        : "";
      return `<member><Id>${escapeXml(entry.get("Id") ?? "")}</Id><MessageId>${messageId}</MessageId>${sequence}</member>`;
    });
    return `<Successful>${successful.join("")}</Successful><Failed/>`;
  }
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
