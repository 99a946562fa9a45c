import { ConfigError, ValidationError } from "../outbox/errors.ts";
import { checkSource, DEFAULT_EVENT_SOURCE } from "./eventBridge/eventBridge.ts";
import { SQS_MAX_MESSAGE_BYTES } from "./sqs/limits.ts";
import { isQueueUrl } from "./sqs/queueUrl.ts";

/**
 * The places one event can be published to, as settings: what the relay's environment names (the default
 * destination, setting.ts) and what each route names (routing/routes.ts). Each validator names the variable or
 * route field at fault.
 */
export interface SqsFifoSetting {
  kind: "sqs-fifo";
  queueUrl: string;
  /** The queue's MaximumMessageSize (RELAY_MAX_MESSAGE_BYTES). */
  maxMessageBytes: number;
}

/** An SQS standard queue: no group or deduplication id; at least once, in no particular order. */
export interface SqsStandardSetting {
  kind: "sqs";
  queueUrl: string;
  maxMessageBytes: number;
}

/** An SNS topic: `sns-fifo` (a `.fifo` topic: group and deduplication ids) or `sns` (standard). */
export interface SnsSetting {
  kind: "sns-fifo" | "sns";
  topicArn: string;
  /** The topic's MaximumMessageSize (SNS's default 262,144; at most 1 MiB). */
  maxMessageBytes: number;
}

/** A Kinesis data stream, by ARN (recommended; another account's stream) or by name. */
export interface KinesisSetting {
  kind: "kinesis";
  stream: { streamArn: string } | { streamName: string };
}

export interface EventBridgeSetting {
  kind: "eventbridge";
  /** A bus name, or a bus ARN (another account's bus). */
  eventBusName: string;
  source: string;
}

export type TargetSetting =
  | SqsFifoSetting
  | SqsStandardSetting
  | SnsSetting
  | KinesisSetting
  | EventBridgeSetting;

/** A bus name (letters, digits, `.`, `-`, `_`, `/`; 1-256) or a bus ARN, e.g. another account's bus. */
const BUS_NAME = /^[/.\-_A-Za-z0-9]{1,256}$/;
const BUS_ARN = /^arn:aws[a-z-]*:events:[a-z0-9-]+:\d{12}:event-bus\/[/.\-_A-Za-z0-9]{1,256}$/;
/** Topic names: 1-256 of letters, digits, `-`, `_`; a FIFO topic's ends in `.fifo` (SNS API Reference, CreateTopic). */
export const TOPIC_ARN = /^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$/;
/** Stream names: 1-128 of `[a-zA-Z0-9_.-]` (Kinesis API Reference, CreateStream). */
export const STREAM_NAME = /^[a-zA-Z0-9_.-]{1,128}$/;
export const STREAM_ARN = /^arn:aws[a-z-]*:kinesis:[a-z0-9-]+:\d{12}:stream\/[a-zA-Z0-9_.-]{1,128}$/;

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

/** The place's short name, for logs and the metrics' `destination` dimension: `sqs-fifo:orders.fifo`. */
export function targetName(target: TargetSetting): string {
  return `${target.kind}:${lastSegment(targetAddress(target))}`;
}

/** The queue URL, topic ARN, stream ARN or name, or bus. */
export function targetAddress(target: TargetSetting): string {
  switch (target.kind) {
    case "sqs-fifo":
    case "sqs":
      return target.queueUrl;
    case "sns-fifo":
    case "sns":
      return target.topicArn;
    case "kinesis":
      return "streamArn" in target.stream ? target.stream.streamArn : target.stream.streamName;
    case "eventbridge":
      return target.eventBusName;
  }
}

/** The last part of a URL path or an ARN: a queue's, topic's, stream's or bus's name. */
export function lastSegment(address: string): string {
  return address.split(/[/:]/).pop() || address;
}
