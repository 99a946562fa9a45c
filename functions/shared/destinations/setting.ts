import { ConfigError, ValidationError } from "../outbox/errors.ts";
import { integer, optionalString } from "../util/env.ts";
import { checkSource, DEFAULT_EVENT_SOURCE } from "./eventBridge/eventBridge.ts";
import { SQS_MAX_MESSAGE_BYTES } from "./sqs/limits.ts";

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

type Env = Record<string, string | undefined>;

/** A bus name (letters, digits, `.`, `-`, `_`, `/`; 1-256) or a bus ARN, e.g. another account's bus. */
const BUS_NAME = /^[/.\-_A-Za-z0-9]{1,256}$/;
const BUS_ARN = /^arn:aws[a-z-]*:events:[a-z0-9-]+:\d{12}:event-bus\/[/.\-_A-Za-z0-9]{1,256}$/;
const QUEUE_URL = /^https?:\/\/[^/\s]+\/\S+$/;

/**
 * Reads the destination: `OUTBOX_QUEUE_URL` (SQS FIFO, with the optional `RELAY_MAX_MESSAGE_BYTES`) or
 * `OUTBOX_EVENT_BUS_NAME` (EventBridge, with the optional `OUTBOX_EVENT_SOURCE`). Exactly one of the two must be
 * set: both is ambiguous and neither publishes nowhere, so each is a configuration error that names them, at
 * cold start. A setting that applies only to the other destination is an error too, not silently ignored.
 */
export function destinationSettingFromEnv(env: Env): DestinationSetting {
  const queueUrl = optionalString(env, "OUTBOX_QUEUE_URL");
  const eventBusName = optionalString(env, "OUTBOX_EVENT_BUS_NAME");
  if (queueUrl !== undefined && eventBusName !== undefined) {
    throw new ConfigError(
      "OUTBOX_QUEUE_URL and OUTBOX_EVENT_BUS_NAME are both set; set exactly one: the SQS FIFO queue or the " +
        "EventBridge bus this relay publishes to",
    );
  }
  if (eventBusName !== undefined) {
    if (optionalString(env, "RELAY_MAX_MESSAGE_BYTES") !== undefined) {
      throw new ConfigError(
        "RELAY_MAX_MESSAGE_BYTES applies only to an SQS queue (OUTBOX_QUEUE_URL); an EventBridge bus's limit is fixed",
      );
    }
    return eventBridgeSetting(
      eventBusName,
      optionalString(env, "OUTBOX_EVENT_SOURCE") ?? DEFAULT_EVENT_SOURCE,
      "OUTBOX_EVENT_BUS_NAME",
      "OUTBOX_EVENT_SOURCE",
    );
  }
  if (queueUrl === undefined) {
    throw new ConfigError(
      "neither OUTBOX_QUEUE_URL nor OUTBOX_EVENT_BUS_NAME is set; set exactly one: the SQS FIFO queue or the " +
        "EventBridge bus this relay publishes to",
    );
  }
  if (optionalString(env, "OUTBOX_EVENT_SOURCE") !== undefined) {
    throw new ConfigError(
      "OUTBOX_EVENT_SOURCE applies only to an EventBridge bus (OUTBOX_EVENT_BUS_NAME); unset it",
    );
  }
  const maxMessageBytes = integer(
    env,
    "RELAY_MAX_MESSAGE_BYTES",
    SQS_MAX_MESSAGE_BYTES,
    1024,
    SQS_MAX_MESSAGE_BYTES,
  );
  return sqsFifoSetting(queueUrl, maxMessageBytes, "OUTBOX_QUEUE_URL");
}

export function sqsFifoSetting(
  queueUrl: string,
  maxMessageBytes: number = SQS_MAX_MESSAGE_BYTES,
  variable = "queueUrl",
): SqsFifoSetting {
  if (!QUEUE_URL.test(queueUrl)) {
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
