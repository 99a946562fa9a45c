/**
 * `outbox dev`'s limits row and claim check, so the write API holds events to what this run's destinations take,
 * as the construct does at deploy (infra/outboxLimits.ts): without it the row keeps its 1 MiB default and a
 * 300 KiB event to a 256 KiB bus would be accepted by `enqueue` and dead-lettered by the relay. The claim check is
 * on (a bucket on the same endpoint), as with the construct's `largePayloads`: a payload over the destination's
 * limit goes through S3 up to 64 MiB, and the consumer library reads it back, as in AWS.
 */
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import type { Queryable } from "../../functions/shared/db/session.ts";
import { writeLimits } from "../../functions/shared/db/sql/writeLimits.ts";
import { eventBridgeMaxRequestBytes } from "../../functions/shared/destinations/eventBridge/eventBridge.ts";
import { KINESIS_MAX_RECORD_BYTES } from "../../functions/shared/destinations/kinesis/kinesis.ts";
import { type PlaceLimit, producerMessageLimit } from "../../functions/shared/destinations/limits.ts";
import type { DestinationSetting } from "../../functions/shared/destinations/setting.ts";
import type { TargetSetting } from "../../functions/shared/destinations/targets.ts";
import {
  checkOutboxLimits,
  DEFAULT_OUTBOX_LIMITS,
  type OutboxLimits,
} from "../../functions/shared/outbox/limits.ts";
import type { OutboxNames } from "../../functions/shared/outbox/names.ts";
import { MAX_PAYLOAD_BYTES_LIMIT } from "../../functions/shared/outbox/payloadPointer.ts";

/** The claim check's bucket on the local endpoint (OUTBOX_PAYLOAD_BUCKET for the relay). */
export const DEV_PAYLOAD_BUCKET = "outbox-dev-payloads";

/** Every place the relay's setting publishes to, with what it accepts. */
export function placesOf(setting: DestinationSetting, region: string): PlaceLimit[] {
  const targets: TargetSetting[] =
    setting.kind === "routes"
      ? [...setting.routes.map((route) => route.destination), ...(setting.fallback ? [setting.fallback] : [])]
      : [setting];
  return targets.map((target) => placeOf(target, region));
}

function placeOf(target: TargetSetting, region: string): PlaceLimit {
  if (target.kind === "kinesis") {
    return { kind: target.kind, maxMessageBytes: KINESIS_MAX_RECORD_BYTES, name: "kinesis" };
  }
  if (target.kind === "eventbridge") {
    return {
      kind: target.kind,
      maxMessageBytes: eventBridgeMaxRequestBytes(target.eventBusName, region),
      name: `eventbridge:${target.eventBusName}`,
    };
  }
  const address = "queueUrl" in target ? target.queueUrl : target.topicArn;
  return { kind: target.kind, maxMessageBytes: target.maxMessageBytes, name: `${target.kind}:${address}` };
}

/** Writes the limits row the write API reads: the tightest destination, the claim check on. */
export async function writeDevLimits(
  db: Queryable,
  names: OutboxNames,
  setting: DestinationSetting,
  region: string,
): Promise<OutboxLimits> {
  const tightest = producerMessageLimit(placesOf(setting, region));
  const limits = checkOutboxLimits(
    {
      maxMessageBytes: tightest?.maxMessageBytes ?? DEFAULT_OUTBOX_LIMITS.maxMessageBytes,
      ...(tightest === undefined ? {} : { limitedBy: tightest.name }),
      claimCheck: true,
      maxPayloadBytes: MAX_PAYLOAD_BYTES_LIMIT,
    },
    "outbox dev limits",
  );
  await writeLimits(db, names, limits);
  return limits;
}

/** The claim check's bucket; creating one that exists is accepted (S3 in us-east-1 answers 200). */
export async function createPayloadBucket(
  config: ConstructorParameters<typeof S3Client>[0],
): Promise<string> {
  const s3 = new S3Client({ ...config, forcePathStyle: true });
  try {
    await s3.send(new CreateBucketCommand({ Bucket: DEV_PAYLOAD_BUCKET }));
  } catch (error) {
    // LocalStack and moto outside us-east-1 answer a repeat with BucketAlreadyOwnedByYou: the bucket is ours.
    if ((error as { name?: string }).name !== "BucketAlreadyOwnedByYou") throw error;
  } finally {
    s3.destroy();
  }
  return DEV_PAYLOAD_BUCKET;
}
