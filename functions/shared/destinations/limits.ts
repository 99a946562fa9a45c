import type { TargetSetting } from "./targets.ts";

/**
 * The write API's message limit, from the places the relay publishes to: what the construct (or `outbox migrate`)
 * writes to the outbox's limits row (outbox/limits.ts) so `enqueue` refuses at write time what a destination
 * would only dead-letter. Imports no AWS SDK: the construct and the CLI use it at synth and migrate time.
 *
 * One number for every event, the smallest of the places: the write API does not know the route table, so an
 * event is checked against the tightest place it could go to. A relay with one destination (the usual) loses
 * nothing by it; with routes to a 256 KiB topic and a 1 MiB queue, every event is held to 256 KiB unless the
 * claim check is on (then a message over it goes through S3 wherever it goes, and the payload limit applies).
 */
export interface PlaceLimit {
  kind: TargetSetting["kind"];
  /** What the place accepts as it counts it (a queue's or topic's MaximumMessageSize, a bus's entry limit). */
  maxMessageBytes: number;
  /** Named in the write API's refusal: `sqs-fifo:orders.fifo` (a token at synth, resolved by CloudFormation). */
  name: string;
}

/**
 * What the write API counts is SQS's message: body plus attributes. A bus entry and a Kinesis record carry the
 * same fields in a JSON envelope instead (envelope.ts): each attribute `name`+`String`+`value` becomes
 * `"name":"value",`, the same bytes, plus what this margin covers: EventBridge's Source (256) and DetailType (the
 * event type again, 256 characters, up to 1,024 bytes), its time (24), the envelope's own punctuation and
 * `headers`/`payload` keys (about 60), a trace context the attributes had no slot for (about 600), JSON escapes
 * of the names and ids (up to 640), and Kinesis's partition key (the aggregate id, 128). 4 KiB holds all of them;
 * only header values made of many characters JSON escapes (quotes, backslashes, tabs, newlines) could go beyond.
 */
export const ENVELOPE_MARGIN_BYTES = 4096;

/** The smallest message limit of the places, as the write API counts messages; undefined with no place. */
export function producerMessageLimit(
  places: readonly PlaceLimit[],
): { maxMessageBytes: number; name: string } | undefined {
  let tightest: { maxMessageBytes: number; name: string } | undefined;
  for (const place of places) {
    const bytes = place.maxMessageBytes - (carriesAttributes(place.kind) ? 0 : ENVELOPE_MARGIN_BYTES);
    if (tightest === undefined || bytes < tightest.maxMessageBytes) {
      tightest = { maxMessageBytes: bytes, name: place.name };
    }
  }
  return tightest;
}

function carriesAttributes(kind: TargetSetting["kind"]): boolean {
  return kind === "sqs-fifo" || kind === "sqs" || kind === "sns-fifo" || kind === "sns";
}
