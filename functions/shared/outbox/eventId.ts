import { randomFillSync } from "node:crypto";

/**
 * A new event's id (the primary key, and the SQS MessageDeduplicationId): a UUID version 7 (RFC 9562, section
 * 5.7): 48 bits of Unix time in milliseconds, then 74 random bits, so ids sort by creation time.
 *
 * Why not version 4 (`randomUUID()`, what the write API used before): the id is the table's primary key, and a
 * random key lands on a random leaf of its B-tree, so every leaf is written to all the time: more page splits,
 * leaves left half full, and, on RDS with full_page_writes on, a full-page image of each leaf at its first change
 * after every checkpoint, across the whole index. A time-ordered key appends at the right edge, as seq does.
 * Measured by bench `wal` with
 * pg_walinspect (full_page_writes off, so without the images): the insert's page splits drop from ~69 to ~55 B of
 * WAL per event (docs/benchmarks.md, "Where the bytes go"). 74 random bits keep ids unguessable within a
 * millisecond and collisions out of reach for SQS's 5-minute deduplication window.
 */
export function newEventId(now: number = Date.now()): string {
  const bytes = randomFillSync(new Uint8Array(16));
  let time = Math.floor(now);
  for (let i = 5; i >= 0; i--) {
    bytes[i] = time % 256;
    time = Math.floor(time / 256);
  }
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x70; // version 7
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80; // variant 0b10 (RFC 9562)
  const hex = Buffer.from(bytes).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
