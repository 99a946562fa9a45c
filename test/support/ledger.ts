import type { Delivery } from "../../cli/dev/aws/fakeSqs.ts";

export interface LedgerReport {
  written: number;
  delivered: number;
  lost: string[];
  /** Deliveries of an id already delivered (SQS drops them within the dedup window; consumers must dedup). */
  duplicates: number;
  /** Pairs (earlier, later) in one group whose first deliveries arrived out of seq order. */
  orderViolations: { group: string; before: string; after: string }[];
}

/**
 * Checks what reached the SQS endpoint against what was written: every event delivered at least once, and per
 * message group the first delivery of each event in seq order. Replays after the first delivery do not count
 * as reordering: FIFO deduplication (or the consumer's inbox) drops them.
 */
export function checkLedger(
  written: { id: string; seq: bigint; aggregateId: string }[],
  deliveries: Delivery[],
) {
  const seqById = new Map(written.map((event) => [event.id, event.seq]));
  const firstSeen = new Set<string>();
  const lastSeqByGroup = new Map<string, { id: string; seq: bigint }>();
  const report: LedgerReport = {
    written: written.length,
    delivered: 0,
    lost: [],
    duplicates: 0,
    orderViolations: [],
  };
  for (const delivery of deliveries) {
    const id = delivery.dedupId ?? "";
    const seq = seqById.get(id);
    if (seq === undefined) continue; // not ours
    if (firstSeen.has(id)) {
      report.duplicates++;
      continue;
    }
    firstSeen.add(id);
    report.delivered++;
    const group = delivery.groupId ?? "";
    const last = lastSeqByGroup.get(group);
    if (last !== undefined && last.seq > seq)
      report.orderViolations.push({ group, before: last.id, after: id });
    lastSeqByGroup.set(group, { id, seq });
  }
  report.lost = written.filter((event) => !firstSeen.has(event.id)).map((event) => event.id);
  return report;
}
