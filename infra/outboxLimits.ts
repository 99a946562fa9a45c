import { Annotations } from "aws-cdk-lib";
import type { IConstruct } from "constructs";
import { type PlaceLimit, producerMessageLimit } from "../functions/shared/destinations/limits.ts";
import {
  checkOutboxLimits,
  DEFAULT_OUTBOX_LIMITS,
  type OutboxLimits,
} from "../functions/shared/outbox/limits.ts";
import { MAX_PAYLOAD_BYTES_LIMIT } from "../functions/shared/outbox/payloadPointer.ts";
import type { Destination } from "./destination.ts";
import type { LargePayloadsProps } from "./payloadBucket.ts";
import type { ResolvedRoutes } from "./routes.ts";

/**
 * The outbox's limits row as this construct's destinations and props make it (outbox/limits.ts), written at
 * deploy time by the migrations custom resource: the one place the write API's limits are set.
 * - maxMessageBytes: the smallest limit of the default destination (`relay.maxMessageBytes`, else what its
 *   template says) and each route's (`maxMessageBytes`, else the template, else the fixed limit): an event the
 *   write API accepts fits wherever it goes (destinations/limits.ts).
 * - claimCheck and maxPayloadBytes: `largePayloads` and its `maxPayloadBytes` (default 64 MiB), the same value
 *   the relay's OUTBOX_MAX_PAYLOAD_BYTES gets; without it, no claim check and the 1 MiB default.
 * A queue whose size the construct can neither read (imported) nor was told gets a synth warning: its limit is
 * taken as SQS's attribute default, 262,144, and the write API refuses more, naming it.
 */
export function outboxLimits(
  scope: IConstruct,
  parts: {
    destination: Destination | undefined;
    /** relay.maxMessageBytes, else the destination's own default. */
    destinationMaxMessageBytes: number;
    /** Whether relay.maxMessageBytes was given. */
    destinationSizeGiven: boolean;
    routes: ResolvedRoutes | undefined;
    largePayloads: LargePayloadsProps | undefined;
  },
): OutboxLimits {
  const { destination, routes, largePayloads } = parts;
  const places: PlaceLimit[] = [...(routes?.limits ?? [])];
  const unknown = [...(routes?.unknownSizes ?? [])];
  if (destination !== undefined) {
    places.unshift({
      kind: destination.kind,
      maxMessageBytes: parts.destinationMaxMessageBytes,
      name: destination.limitName,
    });
    if (!destination.sizeKnown && !parts.destinationSizeGiven) {
      unknown.unshift(`the destination queue (${destination.queue.node.path}; relay.maxMessageBytes)`);
    }
  }
  if (unknown.length > 0) {
    Annotations.of(scope).addWarningV2(
      "aws-outbox-relay:unknown-queue-size",
      `OutboxRelay: the MaximumMessageSize of ${unknown.join(", ")} is not in this app: taken as 262,144, SQS's ` +
        "default, so the relay sends and the write API accepts messages up to that; if the queue takes more, " +
        'say so with its maxMessageBytes (docs/large-payloads.md, "Limits")',
    );
  }
  const tightest = producerMessageLimit(places);
  return checkOutboxLimits(
    {
      maxMessageBytes: tightest?.maxMessageBytes ?? DEFAULT_OUTBOX_LIMITS.maxMessageBytes,
      ...(tightest === undefined ? {} : { limitedBy: tightest.name }),
      claimCheck: largePayloads !== undefined,
      maxPayloadBytes:
        largePayloads === undefined
          ? DEFAULT_OUTBOX_LIMITS.maxPayloadBytes
          : (largePayloads.maxPayloadBytes ?? MAX_PAYLOAD_BYTES_LIMIT),
    },
    "OutboxRelay limits",
  );
}
