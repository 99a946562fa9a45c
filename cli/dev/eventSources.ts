/**
 * Lambda's event source mappings for `outbox dev`'s consumer: each queue polled as the SQS event source does
 * (cli/dev/aws/sqsEventSource.ts: a batch, the handler, the records not in batchItemFailures deleted, the failed
 * ones left to come back after the queue's visibility timeout), each stream read as the Kinesis event source does
 * (cli/dev/aws/kinesisEventSource.ts). What happened is counted and handed to the live view.
 */

import type { KinesisClient } from "@aws-sdk/client-kinesis";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { type InboxRecord, parseInboxEvent } from "../../functions/shared/consumer/index.ts";
import { errorMessage } from "../../functions/shared/outbox/errors.ts";
import { sleep } from "../../functions/shared/util/sleep.ts";
import { KinesisEventSource } from "./aws/kinesisEventSource.ts";
import { pollOnce } from "./aws/sqsEventSource.ts";
import type { LambdaFunction } from "./consumerModule.ts";
import type { ConsumerSource } from "./destinations.ts";
import { invokeLambda } from "./lambdaInvoke.ts";

/** One record's outcome, for the view's "last deliveries". */
export interface DeliveryNote {
  at: Date;
  source: string;
  /** `order.placed order-42`, or the record's id when it is not the relay's. */
  what: string;
  ok: boolean;
}

export interface ConsumerStats {
  /** Handler calls (one per batch). */
  invocations: number;
  records: number;
  /** Records the handler reported failed or that were in a batch it failed as a whole. */
  failedRecords: number;
  /** Calls that threw or called back with an error. */
  handlerErrors: number;
  lastError: string | undefined;
}

export interface EventSourceEvents {
  onDelivery(notes: DeliveryNote[]): void;
  onHandlerError(source: string, error: unknown): void;
  onSourceError(source: string, error: unknown): void;
}

/** How soon a source that failed (the endpoint away) or a stream that had nothing is polled again. */
const RETRY_MS = 1_000;
const STREAM_IDLE_MS = 250;

export class EventSources {
  readonly stats: ConsumerStats = {
    invocations: 0,
    records: 0,
    failedRecords: 0,
    handlerErrors: 0,
    lastError: undefined,
  };
  readonly #handler: LambdaFunction;
  readonly #events: EventSourceEvents;
  readonly #runs: Promise<void>[] = [];
  readonly #stop = new AbortController();

  constructor(handler: LambdaFunction, events: EventSourceEvents) {
    this.#handler = handler;
    this.#events = events;
  }

  start(source: ConsumerSource, clients: { sqs: SQSClient; kinesis: () => KinesisClient }): void {
    if ("queueUrl" in source) this.#runs.push(this.#pollQueue(clients.sqs, source.queueUrl));
    else
      this.#runs.push(this.#readStream(new KinesisEventSource(clients.kinesis(), source), source.streamName));
  }

  /** Stops polling; a batch in the handler finishes first (its outcome is recorded, as Lambda would). */
  async stop(): Promise<void> {
    this.#stop.abort();
    await Promise.all(this.#runs);
  }

  async #pollQueue(sqs: SQSClient, queueUrl: string): Promise<void> {
    const name = queueUrl.slice(queueUrl.lastIndexOf("/") + 1);
    const signal = this.#stop.signal;
    while (!signal.aborted) {
      try {
        await pollOnce(
          sqs,
          queueUrl,
          (event) =>
            this.#invoke(
              name,
              event,
              event.Records.map((r) => r.messageId),
            ),
          {
            batchSize: 10,
            waitSeconds: 1,
            signal,
          },
        );
      } catch (error) {
        if (signal.aborted) return;
        this.#events.onSourceError(name, error);
        await sleep(RETRY_MS, signal);
      }
    }
  }

  async #readStream(stream: KinesisEventSource, name: string): Promise<void> {
    const signal = this.#stop.signal;
    while (!signal.aborted) {
      try {
        const { received } = await stream.pollOnce(
          (event) =>
            this.#invoke(
              name,
              event,
              event.Records.slice(0, 1).map((r) => r.kinesis.sequenceNumber),
            ),
          signal,
        );
        if (received === 0) await sleep(STREAM_IDLE_MS, signal);
      } catch (error) {
        if (signal.aborted) return;
        this.#events.onSourceError(name, error);
        await sleep(RETRY_MS, signal);
      }
    }
  }

  /**
   * `failAll` is what a failed invocation reports: every SQS record; for a stream its first record, from which
   * the shard is read again (the Kinesis event source retries the whole batch).
   */
  async #invoke(source: string, event: { Records: InboxRecord[] }, failAll: string[]) {
    const { response, error } = await invokeLambda(this.#handler, event, failAll);
    this.stats.invocations++;
    this.stats.records += event.Records.length;
    if (error !== undefined) {
      this.stats.handlerErrors++;
      this.stats.lastError = errorMessage(error);
      this.#events.onHandlerError(source, error);
    }
    const failed = new Set(response.batchItemFailures.map((failure) => failure.itemIdentifier));
    const at = new Date();
    let failing = false;
    const notes = event.Records.map((record): DeliveryNote => {
      const id = "kinesis" in record ? record.kinesis.sequenceNumber : record.messageId;
      // A stream is read again from its first failed record: that one and every later one count as failed.
      failing = "kinesis" in record ? failing || failed.has(id) : failed.has(id);
      return { at, source, what: describeRecord(record, id), ok: !failing };
    });
    this.stats.failedRecords += notes.filter((note) => !note.ok).length;
    this.#events.onDelivery(notes);
    return response;
  }
}

function describeRecord(record: InboxRecord, id: string): string {
  try {
    const event = parseInboxEvent(record);
    return `${event.eventType} ${event.aggregateId}`;
  } catch {
    return id;
  }
}
