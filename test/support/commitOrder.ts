import type { Delivery } from "../../cli/dev/aws/fakeSqs.ts";

/** One committed event as its producer saw it: the order key RETURNING gave, and its place in commit order. */
export interface CommittedEvent {
  id: string;
  seq: bigint;
  aggregateId: string;
}

export interface CommitOrderReport {
  committed: number;
  lost: string[];
  /** Per group, adjacent first deliveries whose order key did not increase. */
  seqNotIncreasing: { group: string; before: bigint; after: bigint }[];
  /** Groups whose first deliveries came in an order other than their commit order. */
  notCommitOrder: { group: string; committed: string[]; delivered: string[] }[];
}

/**
 * What an order-sensitive consumer would see: per message group, the first delivery of each event (replays are
 * dropped by FIFO deduplication or the consumer's inbox). Checks that nothing committed is missing, that the
 * order key strictly increases in delivery order, and that delivery order is commit order. `committed` must be
 * in commit order (the order in which the producers' COMMITs returned, issued one after another per group).
 */
export function checkCommitOrder(committed: CommittedEvent[], deliveries: Delivery[]): CommitOrderReport {
  const byId = new Map(committed.map((event) => [event.id, event]));
  const deliveredByGroup = new Map<string, CommittedEvent[]>();
  const seen = new Set<string>();
  for (const delivery of deliveries) {
    const event = byId.get(delivery.dedupId ?? "");
    if (event === undefined || seen.has(event.id)) continue;
    seen.add(event.id);
    const group = deliveredByGroup.get(event.aggregateId) ?? [];
    group.push(event);
    deliveredByGroup.set(event.aggregateId, group);
  }
  const report: CommitOrderReport = {
    committed: committed.length,
    lost: committed.filter((event) => !seen.has(event.id)).map((event) => event.id),
    seqNotIncreasing: [],
    notCommitOrder: [],
  };
  for (const [group, delivered] of deliveredByGroup) {
    delivered.forEach((event, index) => {
      const previous = delivered[index - 1];
      if (previous !== undefined && previous.seq >= event.seq) {
        report.seqNotIncreasing.push({ group, before: previous.seq, after: event.seq });
      }
    });
    const commitOrder = committed.filter((event) => event.aggregateId === group).map((event) => event.id);
    const deliveryOrder = delivered.map((event) => event.id);
    if (commitOrder.join() !== deliveryOrder.join()) {
      report.notCommitOrder.push({ group, committed: commitOrder, delivered: deliveryOrder });
    }
  }
  return report;
}
