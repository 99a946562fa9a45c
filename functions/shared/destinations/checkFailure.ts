import { ConfigError, errorMessage, OutboxError } from "../outbox/errors.ts";
import type { DestinationCheck } from "./destination.ts";

/**
 * What a failed start check (GetQueueAttributes, GetTopicAttributes, DescribeStreamSummary) means, the same for
 * every destination: the place does not exist (a ConfigError naming it: relaying would only fail or dead-letter),
 * the relay may not ask (`verified: false`: publishing needs a different permission, so the caller warns and goes
 * on), no region (ConfigError), or the service could not be asked (a DestinationCheckError: says nothing about the
 * place, so the next invocation asks again).
 */

/** The service could not be asked (unreachable, timed out): says nothing about the destination, so try again later. */
export class DestinationCheckError extends OutboxError {
  override name = "DestinationCheckError";
}

const NOT_ALLOWED = /AccessDenied|AuthorizationError|NotAuthorized|UnauthorizedOperation/;
const NETWORK = /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNRESET|socket hang up/;

export interface CheckedPlace {
  /** The service, for "cannot reach SNS at ...". */
  service: string;
  /** What is checked, for messages: `topic arn:aws:sns:...`. */
  what: string;
  /** The error names (or messages) that mean the place does not exist. */
  missing: RegExp;
  /** Where to look when it does not exist. */
  missingHint: string;
  /** The action the start check needs, for the AccessDenied explanation. */
  action: string;
  /** Where the request went (an emulator's URL, or the service's). */
  endpoint: string;
  /** The class of the "could not ask" error (SQS keeps its own name, which the CLI and tests know). */
  unreachable?: new (
    message: string,
    options: { cause: unknown },
  ) => OutboxError;
}

/** Classifies a start check's failure: throws, or returns the `verified: false` of a denied check. */
export function checkFailure(error: unknown, place: CheckedPlace): DestinationCheck {
  const name = (error as { name?: string }).name ?? "";
  const code = (error as { code?: string }).code ?? "";
  const message = error instanceof Error ? error.message : String(error);
  const Unreachable = place.unreachable ?? DestinationCheckError;
  if (place.missing.test(`${name} ${message}`)) {
    throw new ConfigError(`${place.what} does not exist (${place.missingHint})`, { cause: error });
  }
  if (NOT_ALLOWED.test(name)) {
    return {
      verified: false,
      reason:
        `not allowed to describe ${place.what} (${name}): the start check needs ${place.action} on it; ` +
        "relaying needs only the publish permission, so the relay goes on unchecked",
    };
  }
  if (/Region is missing/i.test(message))
    throw new ConfigError("no AWS region: set AWS_REGION", { cause: error });
  if (NETWORK.test(`${code} ${name} ${message}`)) {
    throw new Unreachable(`cannot reach ${place.service} at ${place.endpoint}: ${message}`, { cause: error });
  }
  throw new Unreachable(`cannot check ${place.what}: ${errorMessage(error)}`, { cause: error });
}
