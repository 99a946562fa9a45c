import { createHash } from "node:crypto";
import { jsonbBodySize } from "../../functions/shared/outbox/jsonbSize.ts";
import { checkSqsText, serializePayload } from "../../functions/shared/outbox/message.ts";
import { median } from "../lib/stats.ts";

/** One payload shape the write API's size check is timed on. */
export interface SizeCheckShape {
  name: string;
  /** Compact JSON bytes of the payload. */
  bytes: number;
  /** Median ms per MiB of JSON of jsonbBodySize alone (outbox/jsonbSize.ts). */
  sizeMsPerMiB: number;
  /**
   * Median ms per MiB of what `enqueue` does to a payload before its INSERT: serializePayload (JSON.stringify with
   * the jsonb checks), the SQS character check and jsonbBodySize.
   */
  checksMsPerMiB: number;
  samples: number;
}

const MIB = 1_048_576;
const SAMPLES = 7;

/** Hex text: a digit followed by `e` all along, so the size check cannot take its no-exponent shortcut. */
function hexText(bytes: number): string {
  return HEX.repeat(Math.ceil(bytes / HEX.length)).slice(0, bytes);
}

const HEX = Array.from({ length: 2048 }, (_, i) => createHash("md5").update(String(i)).digest("hex")).join(
  "",
);

/**
 * The write API's cost per MiB of payload before the database sees it, at the claim check's sizes (issue 38: the
 * size check's regex overflowed the stack on one string of ~8 MiB). Three shapes of 16 MiB: one string; 64 KiB
 * strings each beside a number jsonb prints longer (1e-7); and 16-byte values under 4,096-entry objects, the
 * most tokens per MiB. Each timed SAMPLES times, median; in the bench's own process, no database.
 */
export function measureSizeCheck(totalBytes = 16 * MIB): SizeCheckShape[] {
  const shapes: { name: string; payload: unknown }[] = [
    { name: "one string", payload: { blob: hexText(totalBytes - 11) } },
    {
      name: "64 KiB strings + exponent numbers",
      payload: Array.from({ length: Math.floor(totalBytes / 65_600) }, (_, i) => ({
        s: hexText(65_536),
        n: (i + 1) * 1e-7,
      })),
    },
    {
      name: "16-byte values",
      payload: Array.from({ length: Math.floor(totalBytes / (4_096 * 26)) }, (_, i) =>
        Object.fromEntries(Array.from({ length: 4_096 }, (_, j) => [`k${j}`, hexText(16 + (i % 2))])),
      ),
    },
  ];
  return shapes.map(({ name, payload }) => {
    const json = JSON.stringify(payload);
    const mib = Buffer.byteLength(json) / MIB;
    const size: number[] = [];
    const checks: number[] = [];
    for (let i = 0; i < SAMPLES; i++) {
      let started = performance.now();
      jsonbBodySize(json);
      size.push((performance.now() - started) / mib);
      started = performance.now();
      const text = serializePayload("payload", payload);
      checkSqsText("payload", text);
      jsonbBodySize(text);
      checks.push((performance.now() - started) / mib);
    }
    return {
      name,
      bytes: Buffer.byteLength(json),
      sizeMsPerMiB: median(size),
      checksMsPerMiB: median(checks),
      samples: SAMPLES,
    };
  });
}
