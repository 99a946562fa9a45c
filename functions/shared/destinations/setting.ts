import { ConfigError, ValidationError } from "../outbox/errors.ts";
import type { Env } from "../util/env.ts";
import { integerSetting, isSet, readInteger, readText, textSetting } from "../util/settings.ts";
import { checkSource, DEFAULT_EVENT_SOURCE } from "./eventBridge/eventBridge.ts";
import { SQS_MAX_MESSAGE_BYTES } from "./sqs/limits.ts";
import { isQueueUrl } from "./sqs/queueUrl.ts";

export interface SqsFifoSetting {
  kind: "sqs-fifo";
  queueUrl: string;
  /** The queue's MaximumMessageSize (RELAY_MAX_MESSAGE_BYTES). */
  maxMessageBytes: number;
}

export interface EventBridgeSetting {
  kind: "eventbridge";
  /** A bus name, or a bus ARN (another account's bus). */
  eventBusName: string;
  source: string;
}

/** Where one relay (one outbox table) publishes: exactly one SQS FIFO queue or one EventBridge bus. */
export type DestinationSetting = SqsFifoSetting | EventBridgeSetting;

/** A bus name (letters, digits, `.`, `-`, `_`, `/`; 1-256) or a bus ARN, e.g. another account's bus. */
const BUS_NAME = /^[/.\-_A-Za-z0-9]{1,256}$/;
const BUS_ARN = /^arn:aws[a-z-]*:events:[a-z0-9-]+:\d{12}:event-bus\/[/.\-_A-Za-z0-9]{1,256}$/;

/**
 * Where the relay publishes, as its environment says: exactly one of the queue and the bus, each with the one
 * option that applies to it (the rules are destinationSettingFromEnv's).
 */
export const DESTINATION_SETTINGS = {
  queueUrl: textSetting({
    env: "OUTBOX_QUEUE_URL",
    default: undefined,
    doc: "the SQS FIFO queue the relay publishes to (or OUTBOX_EVENT_BUS_NAME, not both)",
  }),
  maxMessageBytes: integerSetting({
    env: "RELAY_MAX_MESSAGE_BYTES",
    default: SQS_MAX_MESSAGE_BYTES,
    min: 1024,
    max: SQS_MAX_MESSAGE_BYTES,
    doc: "the queue's MaximumMessageSize: bigger events are dead-lettered, not sent (queue only)",
  }),
  eventBusName: textSetting({
    env: "OUTBOX_EVENT_BUS_NAME",
    default: undefined,
    doc: "the EventBridge bus (name or ARN) the relay publishes to (or OUTBOX_QUEUE_URL, not both)",
  }),
  eventSource: textSetting({
    env: "OUTBOX_EVENT_SOURCE",
    default: DEFAULT_EVENT_SOURCE,
    doc: "the events' source on the bus (bus only; not aws.-prefixed)",
  }),
} as const;

/**
 * Reads the destination: `OUTBOX_QUEUE_URL` (SQS FIFO, with the optional `RELAY_MAX_MESSAGE_BYTES`) or
 * `OUTBOX_EVENT_BUS_NAME` (EventBridge, with the optional `OUTBOX_EVENT_SOURCE`). Exactly one of the two must be
 * set: both is ambiguous and neither publishes nowhere, so each is a configuration error that names them, at
 * cold start. A setting that applies only to the other destination is an error too, not silently ignored.
 */
export function destinationSettingFromEnv(env: Env): DestinationSetting {
  const {
    queueUrl: queue,
    eventBusName: bus,
    eventSource: source,
    maxMessageBytes: size,
  } = DESTINATION_SETTINGS;
  const queueUrl = readText(env, queue);
  const eventBusName = readText(env, bus);
  if (queueUrl !== undefined && eventBusName !== undefined) {
    throw new ConfigError(
      `${queue.env} and ${bus.env} are both set; set exactly one: the SQS FIFO queue or the ` +
        "EventBridge bus this relay publishes to",
    );
  }
  if (eventBusName !== undefined) {
    if (isSet(env, size)) {
      throw new ConfigError(
        `${size.env} applies only to an SQS queue (${queue.env}); an EventBridge bus's limit is fixed`,
      );
    }
    return eventBridgeSetting(eventBusName, readText(env, source), bus.env, source.env);
  }
  if (queueUrl === undefined) {
    throw new ConfigError(
      `neither ${queue.env} nor ${bus.env} is set; set exactly one: the SQS FIFO queue or the ` +
        "EventBridge bus this relay publishes to",
    );
  }
  if (isSet(env, source)) {
    throw new ConfigError(`${source.env} applies only to an EventBridge bus (${bus.env}); unset it`);
  }
  return sqsFifoSetting(queueUrl, readInteger(env, size), queue.env);
}

export function sqsFifoSetting(
  queueUrl: string,
  maxMessageBytes: number = SQS_MAX_MESSAGE_BYTES,
  variable = "queueUrl",
): SqsFifoSetting {
  if (!isQueueUrl(queueUrl)) {
    throw new ConfigError(
      `${variable} must be an SQS queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>.fifo), got ${JSON.stringify(queueUrl)}`,
    );
  }
  return { kind: "sqs-fifo", queueUrl, maxMessageBytes };
}

export function eventBridgeSetting(
  eventBusName: string,
  source: string = DEFAULT_EVENT_SOURCE,
  busVariable = "eventBusName",
  sourceVariable = "source",
): EventBridgeSetting {
  if (!BUS_NAME.test(eventBusName) && !BUS_ARN.test(eventBusName)) {
    throw new ConfigError(
      `${busVariable} must be an event bus name (1-256 of letters, digits, . - _ /) or an event bus ARN ` +
        `(arn:aws:events:<region>:<account>:event-bus/<name>), got ${JSON.stringify(eventBusName)}`,
    );
  }
  try {
    checkSource(source);
  } catch (error) {
    if (error instanceof ValidationError) {
      throw new ConfigError(`${sourceVariable}: ${error.message.replace(/^source: /, "")}`, {
        cause: error,
      });
    }
    throw error;
  }
  return { kind: "eventbridge", eventBusName, source };
}

/** For logs and error messages: the queue URL or the bus. */
export function describeDestination(setting: DestinationSetting): string {
  return setting.kind === "sqs-fifo"
    ? `SQS queue ${setting.queueUrl}`
    : `EventBridge bus ${setting.eventBusName}`;
}
