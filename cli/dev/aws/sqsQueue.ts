/**
 * The queue model, with no wire format in it: a queue's attributes, its messages (delayed, visible, in flight),
 * FIFO message groups (one group in flight at a time, messages back from flight in their original order),
 * deduplication within a window, visibility timeouts, purge, and the long polls waiting for a message. What
 * SQS does with a message once a request has been validated; sqsService.ts maps the API actions onto it.
 */
import { ACCOUNT, REGION } from "./account.ts";

/** Real SQS still defaults MaximumMessageSize to 262,144; the relay always sets 1 MiB, so the fake defaults to it. */
export const DEFAULT_MAX_MESSAGE_SIZE = 1_048_576;

export type QueueAttributes = Record<string, string>;

export interface QueueDepth {
  visible: number;
  inFlight: number;
  delayed: number;
  /** ReceiveMessage calls currently long-polling this queue. */
  longPolls: number;
}

/** A message's id and (FIFO) sequence number, as SendMessage answers them. */
export interface AcceptedId {
  messageId: string;
  sequenceNumber: string | undefined;
}

/** A new queue's attributes: SQS's defaults (FIFO ones for a FIFO queue), overridden by those requested. */
export function defaultQueueAttributes(fifo: boolean, requested: QueueAttributes): QueueAttributes {
  return {
    DelaySeconds: "0",
    MaximumMessageSize: String(DEFAULT_MAX_MESSAGE_SIZE),
    MessageRetentionPeriod: "345600",
    ReceiveMessageWaitTimeSeconds: "0",
    VisibilityTimeout: "30",
    SqsManagedSseEnabled: "true",
    ...(fifo
      ? { ContentBasedDeduplication: "false", DeduplicationScope: "queue", FifoThroughputLimit: "perQueue" }
      : {}),
    ...requested,
  };
}

/** A message attribute, parsed and validated (sqsValidation.ts). */
export interface Attribute {
  name: string;
  dataType: string;
  stringValue?: string;
  /** BinaryValue, decoded and (for answers and the delivery log) re-encoded. */
  binary?: Buffer;
  base64?: string;
}

export interface StoredMessage {
  readonly id: string;
  readonly body: string;
  readonly md5OfBody: string;
  /** Sorted by name. */
  readonly attributes: Attribute[];
  readonly md5OfAttributes: string | undefined;
  readonly traceHeader: string | undefined;
  readonly groupId: string | undefined;
  readonly dedupId: string | undefined;
  readonly sequenceNumber: string | undefined;
  /** Arrival order within the fake; orders a group's messages when one comes back from flight. */
  readonly order: number;
  readonly sentAt: number;
  receiveCount: number;
  firstReceiveAt: number;
  receipt: string | undefined;
  timer: NodeJS.Timeout | undefined;
}

/** Array-backed queue: O(1) amortised push/shift; a message back from flight is re-inserted near the head. */
class Deque {
  private items: (StoredMessage | undefined)[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(message: StoredMessage): void {
    this.items.push(message);
  }

  shift(): StoredMessage | undefined {
    if (this.head >= this.items.length) return undefined;
    const message = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > 4096 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return message;
  }

  /** Messages come back from flight ahead of all never-received ones, so this walks at most a few slots. */
  insertOrdered(message: StoredMessage): void {
    let i = this.head;
    while (i < this.items.length && (this.items[i]?.order ?? 0) < message.order) i++;
    if (this.head > 0) {
      for (let j = this.head; j < i; j++) this.items[j - 1] = this.items[j];
      this.head--;
      this.items[i - 1] = message;
    } else {
      this.items.splice(i, 0, message);
    }
  }

  clear(): void {
    this.items = [];
    this.head = 0;
  }
}

/** A FIFO message group (a standard queue keeps all its messages in one group that is never locked). */
interface Group {
  readonly key: string;
  readonly visible: Deque;
  inFlight: number;
}

type Waiter = () => void;

export class Queue {
  readonly fifo: boolean;
  readonly arn: string;
  readonly createdAt = Math.floor(Date.now() / 1000);
  attributes: QueueAttributes;
  maxMessageSize = DEFAULT_MAX_MESSAGE_SIZE;
  visibilityTimeout = 30;
  waitTimeSeconds = 0;
  delaySeconds = 0;
  contentBasedDedup = false;
  dedupPerGroup = false;

  private readonly groups = new Map<string, Group>();
  /** FIFO: groups with visible messages and none in flight, in the order they became ready. */
  private readonly ready = new Set<Group>();
  private readonly inFlight = new Map<string, StoredMessage>();
  private readonly delayed = new Set<NodeJS.Timeout>();
  /** Deduplication key -> first accepted message. Insertion order is arrival order, so expiry pops the front. */
  private readonly dedup = new Map<string, { at: number } & AcceptedId>();
  readonly waiters = new Set<Waiter>();
  private visible = 0;
  readonly name: string;
  readonly url: string;

  constructor(name: string, url: string, attributes: QueueAttributes) {
    this.name = name;
    this.url = url;
    this.fifo = attributes.FifoQueue === "true";
    this.arn = `arn:aws:sqs:${REGION}:${ACCOUNT}:${name}`;
    this.attributes = attributes;
    this.applyAttributes();
  }

  applyAttributes(): void {
    const a = this.attributes;
    this.maxMessageSize = Number(a.MaximumMessageSize);
    this.visibilityTimeout = Number(a.VisibilityTimeout);
    this.waitTimeSeconds = Number(a.ReceiveMessageWaitTimeSeconds);
    this.delaySeconds = Number(a.DelaySeconds);
    this.contentBasedDedup = a.ContentBasedDeduplication === "true";
    this.dedupPerGroup = a.DeduplicationScope === "messageGroup";
  }

  depth(): QueueDepth {
    return {
      visible: this.visible,
      inFlight: this.inFlight.size,
      delayed: this.delayed.size,
      longPolls: this.waiters.size,
    };
  }

  enqueue(message: StoredMessage, delaySeconds: number): void {
    if (delaySeconds > 0) {
      const timer = setTimeout(() => {
        this.delayed.delete(timer);
        this.enqueue(message, 0);
        this.wake();
      }, delaySeconds * 1000);
      timer.unref();
      this.delayed.add(timer);
      return;
    }
    const group = this.group(message);
    group.visible.push(message);
    this.visible++;
    if (this.fifo && group.inFlight === 0) this.ready.add(group);
  }

  /**
   * FIFO deduplication: the ids of the message first accepted under this deduplication id (per group with
   * `DeduplicationScope=messageGroup`) within the window, or undefined after remembering `accepted` as that
   * first message. Ids older than the window are forgotten on the way.
   */
  deduplicate(
    groupId: string | undefined,
    dedupId: string,
    now: number,
    windowMs: number,
    accepted: AcceptedId,
  ): AcceptedId | undefined {
    for (const [key, seen] of this.dedup) {
      if (now - seen.at < windowMs) break;
      this.dedup.delete(key);
    }
    const key = this.dedupPerGroup ? `${groupId}\u0000${dedupId}` : dedupId;
    const seen = this.dedup.get(key);
    if (seen !== undefined) return seen;
    this.dedup.set(key, { at: now, ...accepted });
    return undefined;
  }

  /**
   * Takes up to `max` visible messages and puts them in flight. FIFO: only from groups with nothing in flight,
   * as many as possible from one group before the next (as SQS does); taking locks the group.
   */
  receive(max: number, visibilitySeconds: number, nextReceipt: () => string): StoredMessage[] {
    const taken: StoredMessage[] = [];
    const take = (group: Group) => {
      while (taken.length < max) {
        const message = group.visible.shift();
        if (message === undefined) break;
        taken.push(message);
        group.inFlight++;
      }
    };
    if (this.fifo) {
      for (const group of this.ready) {
        if (taken.length >= max) break;
        take(group);
        this.ready.delete(group);
      }
    } else {
      const group = this.groups.get("");
      if (group) take(group);
    }
    this.visible -= taken.length;
    const now = Date.now();
    for (const message of taken) {
      message.receipt = nextReceipt();
      message.receiveCount++;
      if (message.firstReceiveAt === 0) message.firstReceiveAt = now;
      this.inFlight.set(message.receipt, message);
      this.startVisibilityTimer(message, visibilitySeconds);
    }
    return taken;
  }

  /** Returns false when the handle is not (or no longer) that of a message in flight. */
  delete(receipt: string): boolean {
    const message = this.inFlight.get(receipt);
    if (message === undefined) return false;
    this.leaveFlight(message);
    const group = this.group(message);
    if (group.inFlight === 0) {
      if (group.visible.length === 0) this.groups.delete(group.key);
      else if (this.fifo) {
        this.ready.add(group);
        this.wake();
      }
    }
    return true;
  }

  changeVisibility(receipt: string, seconds: number): boolean {
    const message = this.inFlight.get(receipt);
    if (message === undefined) return false;
    if (seconds === 0) this.returnToQueue(message);
    else this.startVisibilityTimer(message, seconds);
    return true;
  }

  purge(): void {
    for (const message of this.inFlight.values()) clearTimeout(message.timer);
    for (const timer of this.delayed) clearTimeout(timer);
    for (const group of this.groups.values()) group.visible.clear();
    this.inFlight.clear();
    this.delayed.clear();
    this.groups.clear();
    this.ready.clear();
    this.visible = 0;
  }

  hasVisible(): boolean {
    return this.fifo ? this.ready.size > 0 : this.visible > 0;
  }

  /** Hands newly visible messages to long-polling receivers, oldest first. */
  wake(): void {
    for (const waiter of this.waiters) {
      if (!this.hasVisible()) return;
      waiter();
    }
  }

  /** Answers every long poll now (with whatever is visible, usually nothing): queue deleted or server closing. */
  flushWaiters(): void {
    for (const waiter of this.waiters) waiter();
  }

  private group(message: StoredMessage): Group {
    const key = this.fifo ? (message.groupId ?? "") : "";
    let group = this.groups.get(key);
    if (group === undefined) {
      group = { key, visible: new Deque(), inFlight: 0 };
      this.groups.set(key, group);
    }
    return group;
  }

  private startVisibilityTimer(message: StoredMessage, seconds: number): void {
    clearTimeout(message.timer);
    message.timer = setTimeout(() => this.returnToQueue(message), seconds * 1000);
    message.timer.unref();
  }

  private leaveFlight(message: StoredMessage): void {
    clearTimeout(message.timer);
    message.timer = undefined;
    if (message.receipt !== undefined) this.inFlight.delete(message.receipt);
    message.receipt = undefined;
    this.group(message).inFlight--;
  }

  private returnToQueue(message: StoredMessage): void {
    this.leaveFlight(message);
    const group = this.group(message);
    group.visible.insertOrdered(message);
    this.visible++;
    if (this.fifo && group.inFlight === 0) this.ready.add(group);
    this.wake();
  }
}
