import { ConfigError, ValidationError } from "./errors.ts";
import { MAX_PAYLOAD_BYTES_LIMIT } from "./payloadPointer.ts";

/**
 * The outbox's size limits, one row of `outbox_limits` (migrations 0012, 0015): the one place they are set.
 * Written at deploy time by the construct's migrations custom resource (from its destinations and props) or by
 * `outbox migrate`; the insert trigger reads `maxPayloadBytes`, the write API reads all of them inside its insert
 * (produce/destinationLimits.ts). The table in docs/large-payloads.md says what each one limits.
 */
export interface OutboxLimits {
  /**
   * The largest message (body plus attributes, as SQS counts them) the write API accepts without the claim
   * check: the smallest limit among the relay's destinations (destinations/limits.ts).
   */
  maxMessageBytes: number;
  /** The largest payload (bytes of its compact JSON) the table accepts (the insert trigger's bound). */
  maxPayloadBytes: number;
  /** The relay sends a message that does not fit `maxMessageBytes` through S3 (docs/large-payloads.md). */
  claimCheck: boolean;
  /** Which destination sets `maxMessageBytes` (`sqs-fifo:orders.fifo`), for the refusal's words; else none. */
  limitedBy?: string | undefined;
}

/** SQS's maximum message since 2025; what the relay sends by default (RELAY_MAX_MESSAGE_BYTES). */
const ONE_MIB = 1_048_576;

/** The row's column defaults (migrations 0012, 0015): what a database nobody configured holds. */
export const DEFAULT_OUTBOX_LIMITS: OutboxLimits = {
  maxMessageBytes: ONE_MIB,
  maxPayloadBytes: ONE_MIB,
  claimCheck: false,
};

/** The columns' check constraints, so a bad value fails at synth or on the command line, naming the field. */
export function checkOutboxLimits(limits: OutboxLimits, field = "limits"): OutboxLimits {
  const integer = (name: string, value: number, min: number, max: number) => {
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new ValidationError(`${field}.${name}`, `must be an integer from ${min} to ${max}, got ${value}`);
    }
  };
  integer("maxMessageBytes", limits.maxMessageBytes, 1024, ONE_MIB);
  integer("maxPayloadBytes", limits.maxPayloadBytes, 1024, MAX_PAYLOAD_BYTES_LIMIT);
  if (limits.limitedBy !== undefined && Buffer.byteLength(limits.limitedBy) > 1024) {
    throw new ValidationError(`${field}.limitedBy`, "is over 1024 bytes");
  }
  return limits;
}

/**
 * The `Limits` property as CloudFormation delivers it: every scalar of a custom resource's properties arrives as a
 * string. Absent (a construct of an older version): the row is left as it is.
 */
export function limitsProperty(value: unknown): OutboxLimits | undefined {
  if (value === undefined) return undefined;
  const fields = (value ?? {}) as Record<string, unknown>;
  const limits: OutboxLimits = {
    maxMessageBytes: Number(fields.MaxMessageBytes),
    maxPayloadBytes: Number(fields.MaxPayloadBytes),
    claimCheck: String(fields.ClaimCheck) === "true",
    ...(typeof fields.LimitedBy === "string" && fields.LimitedBy !== ""
      ? { limitedBy: fields.LimitedBy }
      : {}),
  };
  try {
    return checkOutboxLimits(limits, "Limits");
  } catch (error) {
    throw new ConfigError(`Custom::OutboxMigrations ${(error as Error).message}`, { cause: error });
  }
}

/** The `Limits` property the construct writes (the inverse of limitsProperty). */
export function limitsPropertyOf(limits: OutboxLimits): Record<string, string | number> {
  return {
    MaxMessageBytes: limits.maxMessageBytes,
    MaxPayloadBytes: limits.maxPayloadBytes,
    ClaimCheck: String(limits.claimCheck),
    ...(limits.limitedBy === undefined ? {} : { LimitedBy: limits.limitedBy }),
  };
}
