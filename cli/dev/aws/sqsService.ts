/**
 * The SQS API over the queues of one endpoint: each action (CreateQueue ... DeleteQueue) validated, applied to
 * the queue model, and answered with SQS's output shape; sends accepted (deduplicated, recorded in the delivery
 * log that tests read) or refused per entry; receives, long polls and deletes. Request-level concerns (HTTP,
 * faults before and after a request, outages) are the server's; this module only sees an action and its input.
 */
import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import { ACCOUNT } from "./account.ts";
import { entryFault, type Faults } from "./faults.ts";
import { defaultQueueAttributes, Queue, type QueueAttributes, type QueueDepth } from "./sqsQueue.ts";
import {
  attributeMap,
  batchEntries,
  checkBatchBytes,
  checkFifoBatch,
  checkQueueName,
  checkReceiptHandle,
  intParam,
  isQueueAttributeName,
  type PreparedSend,
  prepareSend,
  stringList,
  validateQueueAttributes,
} from "./sqsValidation.ts";
import { md5Hex, md5OfAttributes, missing, noQueue, type SendEntry, SqsError, toWire } from "./sqsWire.ts";

/** One accepted send, duplicates included. `attributes` maps name -> StringValue (BinaryValue in base64). */
export interface Delivery {
  queueName: string;
  messageId: string;
  groupId: string | undefined;
  dedupId: string | undefined;
  body: string;
  attributes: Record<string, string>;
  sequenceNumber: string | undefined;
  /** Accepted but not enqueued: its deduplication id was seen within the window. */
  duplicate: boolean;
  at: number;
}

/** The endpoint's counters: the server counts requests and their failures, this module messages and entries. */
export interface FakeSqsStats {
  requests: number;
  throttled: number;
  /** Requests answered with any error other than throttling (injected or validation), or refused while down. */
  failedRequests: number;
  /** Batch entries reported in `Failed` (validation or injected). */
  failedEntries: number;
  /** Sends answered with success, duplicates included (= deliveries recorded). */
  acceptedMessages: number;
  duplicates: number;
  droppedResponses: number;
  receivedMessages: number;
  deletedMessages: number;
}

export function emptyStats(): FakeSqsStats {
  return {
    requests: 0,
    throttled: 0,
    failedRequests: 0,
    failedEntries: 0,
    acceptedMessages: 0,
    duplicates: 0,
    droppedResponses: 0,
    receivedMessages: 0,
    deletedMessages: 0,
  };
}

export class SqsService {
  /** FIFO deduplication window; may be changed at runtime. */
  dedupWindowMs: number;
  private readonly queues = new Map<string, Queue>();
  private log: Delivery[] = [];
  /** Orders accepted messages (and their sequence numbers) and numbers receipt handles. */
  private counter = 0;
  private readonly stats: FakeSqsStats;
  private readonly faults: Faults;
  private readonly baseUrl: () => string;

  /** `stats` and `faults` are the server's live objects; `baseUrl` its URL once listening. */
  constructor(dedupWindowMs: number, stats: FakeSqsStats, faults: Faults, baseUrl: () => string) {
    this.dedupWindowMs = dedupWindowMs;
    this.stats = stats;
    this.faults = faults;
    this.baseUrl = baseUrl;
  }

  queueUrl(queueName: string): string {
    return `${this.baseUrl()}/${ACCOUNT}/${queueName}`;
  }

  queueDepth(queueName: string): QueueDepth | undefined {
    return this.queues.get(queueName)?.depth();
  }

  deliveries(queueName?: string): Delivery[] {
    return queueName === undefined ? [...this.log] : this.log.filter((d) => d.queueName === queueName);
  }

  clearDeliveries(): void {
    this.log = [];
  }

  /** Empties every queue and answers every long poll: the server is closing. */
  close(): void {
    for (const queue of this.queues.values()) {
      queue.purge();
      queue.flushWaiters();
    }
  }

  /** Runs one SQS action; a ReceiveMessage long poll watches `res` to stop waiting when the client leaves. */
  dispatch(action: string, input: Record<string, unknown>, res: ServerResponse): unknown {
    switch (action) {
      case "CreateQueue":
        return this.createQueue(input);
      case "GetQueueUrl": {
        const name = input.QueueName;
        if (typeof name !== "string" || name === "") throw missing("QueueName");
        const queue = this.queues.get(name);
        if (queue === undefined) throw noQueue();
        return { QueueUrl: queue.url };
      }
      case "ListQueues": {
        const prefix = typeof input.QueueNamePrefix === "string" ? input.QueueNamePrefix : "";
        const urls = [...this.queues.values()].filter((q) => q.name.startsWith(prefix)).map((q) => q.url);
        return urls.length > 0 ? { QueueUrls: urls } : {};
      }
      case "GetQueueAttributes":
        return this.getQueueAttributes(input);
      case "SetQueueAttributes": {
        const queue = this.queue(input);
        const attributes = attributeMap(input.Attributes);
        if (attributes.FifoQueue !== undefined)
          throw new SqsError("InvalidAttributeName", "Unknown Attribute FifoQueue.");
        validateQueueAttributes(attributes, queue.fifo);
        queue.attributes = { ...queue.attributes, ...attributes };
        queue.applyAttributes();
        return {};
      }
      case "SendMessage":
        return this.sendMessage(input);
      case "SendMessageBatch":
        return this.sendMessageBatch(input);
      case "ReceiveMessage":
        return this.receiveMessage(input, res);
      case "DeleteMessage": {
        const queue = this.queue(input);
        this.deleteOne(queue, input.ReceiptHandle);
        return {};
      }
      case "DeleteMessageBatch":
        return this.deleteMessageBatch(input);
      case "ChangeMessageVisibility": {
        const queue = this.queue(input);
        const receipt = input.ReceiptHandle;
        if (typeof receipt !== "string" || receipt === "") throw missing("ReceiptHandle");
        const seconds = intParam(input, "VisibilityTimeout", 0, 43_200);
        if (seconds === undefined) throw missing("VisibilityTimeout");
        checkReceiptHandle(receipt);
        if (!queue.changeVisibility(receipt, seconds)) {
          throw new SqsError("MessageNotInflight", "The message referred to isn't in flight.");
        }
        return {};
      }
      case "PurgeQueue":
        this.queue(input).purge();
        return {};
      case "DeleteQueue": {
        const queue = this.queue(input);
        this.queues.delete(queue.name);
        queue.purge();
        queue.flushWaiters();
        return {};
      }
      default:
        throw new SqsError(
          "InvalidAction",
          `The action ${action || "(none)"} is not valid for this endpoint.`,
        );
    }
  }

  private queue(input: Record<string, unknown>): Queue {
    const url = input.QueueUrl;
    if (typeof url !== "string" || url === "") throw missing("QueueUrl");
    const queue = this.queues.get(url.slice(url.lastIndexOf("/") + 1));
    if (queue === undefined) throw noQueue();
    return queue;
  }

  private createQueue(input: Record<string, unknown>): unknown {
    const name = input.QueueName;
    if (typeof name !== "string" || name === "") throw missing("QueueName");
    const requested = attributeMap(input.Attributes);
    const fifo = requested.FifoQueue === "true";
    checkQueueName(name, fifo);
    if (requested.FifoQueue === "false") delete requested.FifoQueue;
    validateQueueAttributes(requested, fifo);
    const existing = this.queues.get(name);
    if (existing !== undefined) {
      // Same name and same attributes is idempotent; different attributes is an error, as in SQS.
      for (const [key, value] of Object.entries(requested)) {
        if (existing.attributes[key] !== value) {
          throw new SqsError(
            "QueueNameExists",
            "A queue already exists with the same name and a different value for attribute(s).",
          );
        }
      }
      return { QueueUrl: existing.url };
    }
    const queue = new Queue(name, this.queueUrl(name), defaultQueueAttributes(fifo, requested));
    this.queues.set(name, queue);
    return { QueueUrl: queue.url };
  }

  private getQueueAttributes(input: Record<string, unknown>): unknown {
    const queue = this.queue(input);
    const depth = queue.depth();
    const all: QueueAttributes = {
      QueueArn: queue.arn,
      ApproximateNumberOfMessages: String(depth.visible),
      ApproximateNumberOfMessagesNotVisible: String(depth.inFlight),
      ApproximateNumberOfMessagesDelayed: String(depth.delayed),
      CreatedTimestamp: String(queue.createdAt),
      LastModifiedTimestamp: String(queue.createdAt),
      ...queue.attributes,
    };
    const names = stringList(input.AttributeNames);
    if (names.includes("All")) return { Attributes: all };
    const selected: QueueAttributes = {};
    for (const name of names) {
      const value = all[name];
      if (value !== undefined) selected[name] = value;
      else if (!isQueueAttributeName(name))
        throw new SqsError("InvalidAttributeName", `Unknown Attribute ${name}.`);
    }
    return names.length > 0 ? { Attributes: selected } : {};
  }

  /** SendMessage; also how EventBridge delivers a matched event to a target queue. */
  sendMessage(input: Record<string, unknown>): unknown {
    const queue = this.queue(input);
    const entry = input as SendEntry;
    const prepared = prepareSend(queue, entry);
    const injected = entryFault(this.faults, entry, queue.name);
    if (injected) throw new SqsError(injected.code, injected.message, injected.senderFault ? 400 : 500);
    const result = this.accept(queue, prepared);
    queue.wake();
    return result;
  }

  private sendMessageBatch(input: Record<string, unknown>): unknown {
    const queue = this.queue(input);
    const entries = batchEntries<SendEntry>(input);
    checkBatchBytes(entries);
    checkFifoBatch(queue, entries);
    const Successful: unknown[] = [];
    const Failed: unknown[] = [];
    for (const entry of entries) {
      let prepared: PreparedSend;
      try {
        prepared = prepareSend(queue, entry);
      } catch (error) {
        if (!(error instanceof SqsError)) throw error;
        Failed.push({ Id: entry.Id, SenderFault: true, Code: error.code, Message: error.message });
        continue;
      }
      const injected = entryFault(this.faults, entry, queue.name);
      if (injected) {
        Failed.push({
          Id: entry.Id,
          SenderFault: injected.senderFault,
          Code: injected.code,
          Message: injected.message,
        });
        continue;
      }
      Successful.push({ Id: entry.Id, ...this.accept(queue, prepared) });
    }
    this.stats.failedEntries += Failed.length;
    queue.wake();
    return { Successful, Failed };
  }

  /** Records an accepted send and enqueues it unless its deduplication id was seen within the window. */
  private accept(queue: Queue, send: PreparedSend): Record<string, string> {
    const now = Date.now();
    const order = ++this.counter;
    const fresh = {
      messageId: randomUUID(),
      // 20 digits, increasing, like SQS's (which are large and non-consecutive).
      sequenceNumber: queue.fifo ? `1${String(order).padStart(19, "0")}` : undefined,
    };
    // SQS answers a duplicate with success (and, here, the first message's id and sequence number).
    const first =
      queue.fifo && send.dedupId !== undefined
        ? queue.deduplicate(send.groupId, send.dedupId, now, this.dedupWindowMs, fresh)
        : undefined;
    const duplicate = first !== undefined;
    const { messageId, sequenceNumber } = first ?? fresh;
    // The SDK checks MD5OfMessageBody against the body it sent, so a duplicate gets the MD5 of its own body.
    const md5OfBody = md5Hex(send.body);
    const attributesMd5 = md5OfAttributes(send.attributes);
    if (!duplicate) {
      queue.enqueue(
        {
          id: messageId,
          body: send.body,
          md5OfBody,
          attributes: send.attributes,
          md5OfAttributes: attributesMd5,
          traceHeader: send.traceHeader,
          groupId: send.groupId,
          dedupId: send.dedupId,
          sequenceNumber,
          order,
          sentAt: now,
          receiveCount: 0,
          firstReceiveAt: 0,
          receipt: undefined,
          timer: undefined,
        },
        send.delaySeconds,
      );
    }
    const attributes: Record<string, string> = {};
    for (const a of send.attributes) attributes[a.name] = a.stringValue ?? a.base64 ?? "";
    this.log.push({
      queueName: queue.name,
      messageId,
      groupId: send.groupId,
      dedupId: send.dedupId,
      body: send.body,
      attributes,
      sequenceNumber,
      duplicate,
      at: now,
    });
    this.stats.acceptedMessages++;
    if (duplicate) this.stats.duplicates++;
    const result: Record<string, string> = { MessageId: messageId, MD5OfMessageBody: md5OfBody };
    if (attributesMd5 !== undefined) result.MD5OfMessageAttributes = attributesMd5;
    if (send.md5OfSystemAttributes !== undefined)
      result.MD5OfMessageSystemAttributes = send.md5OfSystemAttributes;
    if (sequenceNumber !== undefined) result.SequenceNumber = sequenceNumber;
    return result;
  }

  private receiveMessage(input: Record<string, unknown>, res: ServerResponse): unknown {
    const queue = this.queue(input);
    const max = intParam(input, "MaxNumberOfMessages", 1, 10) ?? 1;
    const visibility = intParam(input, "VisibilityTimeout", 0, 43_200) ?? queue.visibilityTimeout;
    const wait = intParam(input, "WaitTimeSeconds", 0, 20) ?? queue.waitTimeSeconds;
    const systemNames = new Set([
      ...stringList(input.AttributeNames),
      ...stringList(input.MessageSystemAttributeNames),
    ]);
    const attributeNames = stringList(input.MessageAttributeNames);

    const receive = () => {
      const messages = queue.receive(max, visibility, () => `AQEB-${++this.counter}-${randomUUID()}`);
      this.stats.receivedMessages += messages.length;
      return messages.length === 0
        ? {}
        : { Messages: messages.map((m) => toWire(m, systemNames, attributeNames)) };
    };
    if (wait === 0 || queue.hasVisible()) return receive();
    // The client left (or close() ran) while the request waited out its latency: nobody to wait for.
    if (res.socket === null || res.socket.destroyed) return {};
    // Long poll: answer as soon as a message becomes visible, or empty when the wait ends or the client leaves.
    return new Promise((resolve) => {
      const finish = (output: unknown) => {
        queue.waiters.delete(waiter);
        clearTimeout(timer);
        res.off("close", onClose);
        resolve(output);
      };
      const waiter = () => finish(receive());
      const onClose = () => finish({});
      const timer = setTimeout(() => finish({}), wait * 1000);
      timer.unref();
      res.on("close", onClose);
      queue.waiters.add(waiter);
    });
  }

  private deleteOne(queue: Queue, receipt: unknown): void {
    if (typeof receipt !== "string" || receipt === "") throw missing("ReceiptHandle");
    checkReceiptHandle(receipt);
    // A stale handle (message already deleted or visible again) succeeds without deleting, as in SQS.
    if (queue.delete(receipt)) this.stats.deletedMessages++;
  }

  private deleteMessageBatch(input: Record<string, unknown>): unknown {
    const queue = this.queue(input);
    const Successful: unknown[] = [];
    const Failed: unknown[] = [];
    for (const entry of batchEntries<{ Id?: string; ReceiptHandle?: unknown }>(input)) {
      try {
        this.deleteOne(queue, entry.ReceiptHandle);
        Successful.push({ Id: entry.Id });
      } catch (error) {
        if (!(error instanceof SqsError)) throw error;
        Failed.push({ Id: entry.Id, SenderFault: true, Code: error.code, Message: error.message });
      }
    }
    this.stats.failedEntries += Failed.length;
    return { Successful, Failed };
  }
}
