import { groupOf, type InboxRecord } from "./inboxRecord.ts";

export interface GroupProcessing<R extends InboxRecord = InboxRecord> {
  /** Groups in flight at once. */
  concurrency: number;
  /** Processes one record; false (or a throw) fails it. */
  process(record: R): Promise<boolean>;
  /** A record not processed because an earlier one of its group failed. */
  onSkipped?(record: R, groupId: string): void;
}

/**
 * FIFO's partial-failure rule: records of one message group run one after another in delivery order; once one
 * fails, the group's later records are not run and are failed too, so SQS redelivers them after it, in order.
 * Groups are independent and run side by side, at most `concurrency` at once. Returns the failed records in
 * delivery order. A record without a group (a standard queue, e.g. an EventBridge rule's target) is a group of
 * its own. Deliberately not grouped by the event's aggregate instead: the bus has already lost the order, so
 * running one aggregate's records one after another would promise an order that is not there, and would fail
 * a healthy record because an unrelated earlier delivery failed. A handler tells a late event by `seq`.
 * Kinesis: the group is the partition key (= the aggregate), so a key's later records wait for a failed one; Lambda
 * restarts the shard from the lowest reported sequence number anyway, and the inbox skips what was applied.
 */
export async function processByGroup<R extends InboxRecord>(
  records: readonly R[],
  options: GroupProcessing<R>,
): Promise<R[]> {
  const groups = new Map<string, R[]>();
  for (const record of records) {
    const groupId = groupOf(record);
    const group = groups.get(groupId);
    if (group === undefined) groups.set(groupId, [record]);
    else group.push(record);
  }
  const failed = new Set<R>();
  const runGroup = async ([groupId, group]: [string, R[]]) => {
    for (const [index, record] of group.entries()) {
      const ok = await options.process(record).catch(() => false);
      if (ok) continue;
      failed.add(record);
      for (const rest of group.slice(index + 1)) {
        failed.add(rest);
        options.onSkipped?.(rest, groupId);
      }
      return;
    }
  };
  const queue = [...groups.entries()];
  const worker = async () => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) await runGroup(next);
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency, queue.length) }, worker));
  return records.filter((record) => failed.has(record));
}
