/**
 * Fault injection: the settings a test flips to make the endpoint fail the way real SQS fails (latency,
 * throttling, a failed request, one batch entry rejected, a response lost after the send was accepted, an
 * outage), and what each setting means for one request or entry. The server decides when to ask (before
 * handling, per entry, after handling); this module only answers, so the faults read in one place.
 */
import { type SendEntry, SqsError } from "./sqsWire.ts";

/** What the request-level fault predicates see. `n` is the request's 1-based number since the server started. */
export interface RequestInfo {
  action: string;
  queueName: string | undefined;
  input: Record<string, unknown>;
  n: number;
}

/** An error to answer with. `code` is an SQS error shape name (e.g. `QueueDoesNotExist`) or any query code. */
export interface ErrorSpec {
  code: string;
  /** Defaults to the SDK model's status for modelled errors, else 500 for `Internal*`/`ServiceUnavailable`, else 400. */
  status?: number;
  message?: string;
}

export interface EntryFailure {
  code: string;
  senderFault: boolean;
  message?: string;
}

type RequestPredicate = (action: string, request: RequestInfo) => boolean;

export interface Faults {
  /** Added before every request is handled. */
  latencyMs: number | ((action: string, request: RequestInfo) => number);
  /** Whole request fails before it is handled: `true` = 500 InternalError, or return an ErrorSpec. */
  failRequests: boolean | ((action: string, request: RequestInfo) => boolean | ErrorSpec);
  /** Probability 0..1, or a predicate: the request is answered with a throttling error. */
  throttle: number | RequestPredicate;
  /**
   * `ThrottlingException` (400; what SQS's common errors document) or `RequestThrottled` (the modelled SQS
   * error, 403 per the SDK model). The SDK classifies both as throttling by name and retries them.
   */
  throttleCode: "ThrottlingException" | "RequestThrottled";
  /** After validation, before the message is accepted: that entry fails (a SendMessage request fails whole). */
  failEntry: false | ((entry: SendEntry, queueName: string) => false | EntryFailure);
  /** The request is fully handled (sends accepted and recorded) but the connection is destroyed, no response. */
  dropResponse: boolean | RequestPredicate;
}

/** An outage (FakeSqs.down): `reset` destroys every connection on arrival, `unavailable` answers 503. */
export type Outage = "reset" | "unavailable";

export function defaultFaults(): Faults {
  return {
    latencyMs: 0,
    failRequests: false,
    throttle: 0,
    throttleCode: "ThrottlingException",
    failEntry: false,
    dropResponse: false,
  };
}

/** The delay to add before handling this request. */
export function latencyOf(faults: Faults, action: string, request: RequestInfo): number {
  return typeof faults.latencyMs === "function" ? faults.latencyMs(action, request) : faults.latencyMs;
}

/**
 * The error this request is answered with instead of being handled, if any, checked in this order: an
 * `unavailable` outage, throttling, an injected request failure.
 */
export function requestFault(
  faults: Faults,
  outage: Outage | undefined,
  action: string,
  request: RequestInfo,
): SqsError | undefined {
  if (outage === "unavailable") {
    return new SqsError("ServiceUnavailable", "Service is unavailable. Please try again.");
  }
  const throttle = faults.throttle;
  if (typeof throttle === "function" ? throttle(action, request) : throttle > 0 && Math.random() < throttle) {
    return new SqsError(faults.throttleCode, "Rate exceeded");
  }
  const failure =
    typeof faults.failRequests === "function" ? faults.failRequests(action, request) : faults.failRequests;
  if (failure === true)
    return new SqsError("InternalError", "We encountered an internal error. Please try again.");
  if (failure) return new SqsError(failure.code, injectedMessage(failure), failure.status);
  return undefined;
}

/** Whether the handled request's answer is withheld and its connection destroyed. */
export function dropsResponse(faults: Faults, action: string, request: RequestInfo): boolean {
  const drop = faults.dropResponse;
  return typeof drop === "function" ? drop(action, request) : drop;
}

/** The injected failure of one validated send entry, if any, with its message filled in. */
export function entryFault(
  faults: Faults,
  entry: SendEntry,
  queueName: string,
): (EntryFailure & { message: string }) | undefined {
  const injected = faults.failEntry ? faults.failEntry(entry, queueName) : false;
  return injected ? { ...injected, message: injectedMessage(injected) } : undefined;
}

function injectedMessage(failure: { code: string; message?: string }): string {
  return failure.message ?? `Injected ${failure.code}`;
}
