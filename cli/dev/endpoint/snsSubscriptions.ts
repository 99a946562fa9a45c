/**
 * What `outbox dev` needs of SNS beyond the in-process endpoint's CreateTopic and PublishBatch
 * (cli/dev/aws/fakeSns.ts, which records what was published and delivers nothing): GetTopicAttributes (the
 * relay's topic check), Subscribe with an SQS queue, and delivery of each published message to the subscribed
 * queues, in publish order, as SNS does (Amazon SNS Developer Guide, "Fanout to Amazon SQS queues"; with
 * RawMessageDelivery the message body and attributes as sent, else the JSON notification; from a FIFO topic the
 * message group and deduplication id carry over, "Message ordering details for FIFO topics").
 */
import { randomUUID } from "node:crypto";
import { FakeSns, type PublishedMessage, SnsError } from "../aws/fakeSns.ts";

export interface Subscription {
  topicArn: string;
  queueArn: string;
  raw: boolean;
}

/** Sends one message to a queue of this endpoint (by ARN); resolves once the queue has it. */
export type SendToQueue = (
  queueArn: string,
  message: { body: string; attributes: Record<string, string>; groupId?: string; dedupId?: string },
) => Promise<void>;

const XMLNS = "http://sns.amazonaws.com/doc/2010-03-31/";

export class SubscribingSns extends FakeSns {
  readonly #subscriptions: Subscription[] = [];
  /** Deliveries one after another, so a group's messages reach its queue in publish order. */
  #delivering: Promise<void> = Promise.resolve();
  #send: SendToQueue | undefined;
  /** Deliveries that failed (the queue deleted, ...): counted, as SNS counts NumberOfNotificationsFailed. */
  failedDeliveries = 0;

  /** Where deliveries go; until set, messages are published and not delivered. */
  deliverWith(send: SendToQueue): void {
    this.#send = send;
  }

  /** Resolves once every message published so far has been delivered (or failed to be). */
  delivered(): Promise<void> {
    return this.#delivering;
  }

  override handle(action: string, form: Map<string, string>): string {
    switch (action) {
      case "Subscribe":
        return this.#subscribe(form);
      case "GetTopicAttributes":
        return this.#topicAttributes(form);
      default: {
        const answer = super.handle(action, form);
        if (action === "PublishBatch") this.#deliverPublished();
        return answer;
      }
    }
  }

  #subscribe(form: Map<string, string>): string {
    const topicArn = form.get("TopicArn") ?? "";
    this.#requireTopic(topicArn);
    if (form.get("Protocol") !== "sqs") {
      throw new SnsError("InvalidParameter", "only the sqs protocol is served by outbox dev's endpoint");
    }
    const attributes = entries(form, "Attributes.entry");
    this.#subscriptions.push({
      topicArn,
      queueArn: form.get("Endpoint") ?? "",
      raw: attributes.RawMessageDelivery === "true",
    });
    return answer("Subscribe", `<SubscriptionArn>${topicArn}:${randomUUID()}</SubscriptionArn>`);
  }

  #topicAttributes(form: Map<string, string>): string {
    const topicArn = form.get("TopicArn") ?? "";
    this.#requireTopic(topicArn);
    const attributes = { TopicArn: topicArn, FifoTopic: String(topicArn.endsWith(".fifo")) };
    const xml = Object.entries(attributes)
      .map(([key, value]) => `<entry><key>${key}</key><value>${value}</value></entry>`)
      .join("");
    return answer("GetTopicAttributes", `<Attributes>${xml}</Attributes>`);
  }

  /** A topic exists once created: the base class answers NotFound for any other (through an empty batch). */
  #requireTopic(topicArn: string): void {
    try {
      super.handle("PublishBatch", new Map([["TopicArn", topicArn]]));
    } catch (error) {
      if (!(error instanceof SnsError && error.code === "EmptyBatchRequest")) throw error;
    }
  }

  #deliverPublished(): void {
    const published = this.published();
    this.clear();
    for (const message of published) {
      for (const subscription of this.#subscriptions) {
        if (subscription.topicArn !== message.topicArn) continue;
        this.#delivering = this.#delivering.then(() => this.#deliver(subscription, message));
      }
    }
  }

  async #deliver(subscription: Subscription, message: PublishedMessage): Promise<void> {
    if (this.#send === undefined) return;
    const fifo = { groupId: message.groupId, dedupId: message.dedupId ?? message.messageId };
    const body = subscription.raw ? message.message : notification(message);
    await this.#send(subscription.queueArn, {
      body,
      attributes: subscription.raw ? message.attributes : {},
      ...(message.groupId === undefined ? {} : fifo),
    }).catch(() => {
      this.failedDeliveries++;
    });
  }
}

/** The JSON an SQS subscriber receives without raw delivery (Amazon SNS Developer Guide, "message format"). */
function notification(message: PublishedMessage): string {
  const attributes: Record<string, { Type: string; Value: string }> = {};
  for (const [name, value] of Object.entries(message.attributes))
    attributes[name] = { Type: "String", Value: value };
  return JSON.stringify({
    Type: "Notification",
    MessageId: message.messageId,
    TopicArn: message.topicArn,
    Message: message.message,
    Timestamp: new Date(message.at).toISOString(),
    MessageAttributes: attributes,
  });
}

/** `prefix.N.key` / `prefix.N.value` pairs as awsQuery flattens a map. */
function entries(form: Map<string, string>, prefix: string): Record<string, string> {
  const result: Record<string, string> = {};
  for (const [key, value] of form) {
    const match = new RegExp(`^${prefix.replaceAll(".", "\\.")}\\.(\\d+)\\.key$`).exec(key);
    if (match !== null) result[value] = form.get(`${prefix}.${match[1]}.value`) ?? "";
  }
  return result;
}

function answer(action: string, result: string): string {
  return (
    `<${action}Response xmlns="${XMLNS}"><${action}Result>${result}</${action}Result>` +
    `<ResponseMetadata><RequestId>${randomUUID()}</RequestId></ResponseMetadata></${action}Response>`
  );
}
