import { ConfigError } from "../../outbox/errors.ts";
import { isValidKeyPrefix, MAX_PAYLOAD_BYTES_LIMIT } from "../../outbox/payloadPointer.ts";
import type { Env } from "../../util/env.ts";
import { integerSetting, readInteger, readText, textSetting } from "../../util/settings.ts";

/** The claim check as configured: off (undefined) unless a bucket is named. */
export interface ClaimCheckSetting {
  bucket: string;
  prefix: string;
  thresholdBytes?: number;
  maxPayloadBytes: number;
}

/**
 * The claim check's settings (docs/large-payloads.md): the relay reads them, the construct writes them from its
 * `largePayloads` prop. Without OUTBOX_PAYLOAD_BUCKET the relay behaves as before: a payload whose message does
 * not fit is dead-lettered, naming the limit.
 */
export const CLAIM_CHECK_SETTINGS = {
  bucket: textSetting({
    env: "OUTBOX_PAYLOAD_BUCKET",
    default: undefined,
    doc: "S3 bucket for payloads too large for the destination (the claim check); unset: off",
  }),
  prefix: textSetting({
    env: "OUTBOX_PAYLOAD_PREFIX",
    default: "",
    doc: "key prefix of the payload objects (the key is prefix + outbox id); a-z A-Z 0-9 . / _ -",
  }),
  thresholdBytes: integerSetting({
    env: "OUTBOX_PAYLOAD_THRESHOLD_BYTES",
    default: undefined,
    min: 0,
    max: MAX_PAYLOAD_BYTES_LIMIT,
    doc: "payloads over this many bytes always go through S3; unset: only those whose message would not fit",
  }),
  maxPayloadBytes: integerSetting({
    env: "OUTBOX_MAX_PAYLOAD_BYTES",
    default: MAX_PAYLOAD_BYTES_LIMIT,
    min: 1024,
    max: MAX_PAYLOAD_BYTES_LIMIT,
    doc: "largest payload the claim check sends; larger ones are dead-lettered (the table's limit: outbox limits)",
  }),
} as const;

export function claimCheckSettingFromEnv(env: Env): ClaimCheckSetting | undefined {
  const s = CLAIM_CHECK_SETTINGS;
  const bucket = readText(env, s.bucket);
  const prefix = readText(env, s.prefix);
  const thresholdBytes = readInteger(env, s.thresholdBytes);
  const maxPayloadBytes = readInteger(env, s.maxPayloadBytes);
  if (bucket === undefined) return undefined;
  if (!isValidKeyPrefix(prefix)) {
    throw new ConfigError(
      `${s.prefix.env} must be at most 900 of a-z A-Z 0-9 . / _ - (the Extended Client's key alphabet), got ${JSON.stringify(prefix)}`,
    );
  }
  return {
    bucket,
    prefix,
    maxPayloadBytes,
    ...(thresholdBytes === undefined ? {} : { thresholdBytes }),
  };
}
