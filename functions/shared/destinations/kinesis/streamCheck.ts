import { DescribeStreamSummaryCommand, type KinesisClient } from "@aws-sdk/client-kinesis";
import { ConfigError } from "../../outbox/errors.ts";
import { checkFailure, DestinationCheckError } from "../checkFailure.ts";
import type { DestinationCheck } from "../destination.ts";

/**
 * Asks Kinesis about the stream once before relaying (DescribeStreamSummary, which needs
 * kinesis:DescribeStreamSummary):
 * - a stream that does not exist, or is being deleted, would turn every PutRecords into a retried failure;
 * - PutRecords needs an ACTIVE or UPDATING stream ("Kinesis Data Streams allows write operations on streams in
 *   the ACTIVE and UPDATING states"; CREATING cannot take records yet: asked again by the next invocation);
 * - `RecordDistributionStrategy: AUTO` "distributes records evenly across shards and ignores any partition key"
 *   (API Reference, CreateStream): per-aggregate order, which the route promises, is then lost. The field is
 *   "only present for streams that use the on-demand capacity mode"; absent means partition keys decide.
 * Failures to ask are classified by checkFailure.ts.
 */
export async function checkStream(
  kinesis: KinesisClient,
  stream: { streamArn: string } | { streamName: string },
  endpoint: string,
  timeoutMs: number,
): Promise<DestinationCheck> {
  const name = "streamArn" in stream ? stream.streamArn : stream.streamName;
  let summary: { StreamStatus?: string; RecordDistributionStrategy?: string };
  try {
    const response = await kinesis.send(
      new DescribeStreamSummaryCommand(
        "streamArn" in stream ? { StreamARN: stream.streamArn } : { StreamName: stream.streamName },
      ),
      { abortSignal: AbortSignal.timeout(timeoutMs) },
    );
    summary = response.StreamDescriptionSummary ?? {};
  } catch (error) {
    return checkFailure(error, {
      service: "Kinesis",
      what: `stream ${name}`,
      missing: /ResourceNotFound/,
      missingHint: "check the route's streamArn or streamName, its region and account, and the endpoint",
      action: "kinesis:DescribeStreamSummary",
      endpoint,
    });
  }
  const status = summary.StreamStatus;
  if (status === "DELETING") {
    throw new ConfigError(`stream ${name} is being deleted: point the route at a stream that stays`);
  }
  if (status === "CREATING") {
    throw new DestinationCheckError(
      `stream ${name} is still CREATING and cannot take records yet; the next invocation checks again`,
    );
  }
  if (summary.RecordDistributionStrategy === "AUTO") {
    throw new ConfigError(
      `stream ${name} uses the AUTO record distribution strategy, which ignores partition keys: the relay's ` +
        "per-aggregate order (PartitionKey = aggregate_id) would be lost; use USER_PARTITION_KEY (the default)",
    );
  }
  return { verified: true };
}
