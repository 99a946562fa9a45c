import type pg from "pg";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { sqsFifoDestination } from "../../functions/shared/destinations/sqs/sqsFifo.ts";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { DEFAULT_PURGE_OPTIONS } from "../../functions/shared/purge/purge.ts";
import { purgePublished } from "../../functions/shared/purge/sql/purgePublished.ts";
import { DEFAULT_RELAY_OPTIONS, runRelay } from "../../functions/shared/relay/engine.ts";
import type { Retention } from "../../functions/shared/relay/sql/recordOutcomes.ts";
import { resetOutbox } from "../lib/benchDatabase.ts";
import { createBenchQueue, relaySqsClient } from "../lib/sqsClient.ts";
import type { BenchSqsEndpoint } from "../lib/sqsEndpoint.ts";
import { formatNumber, markdownTable } from "../lib/table.ts";

export interface WalPerEventRun {
  /** OUTBOX_RETENTION the relay ran with (absent in runs before migration 0011: keep). */
  retention?: Retention;
  /** The server's full_page_writes: off in the bench's server (its command line), so no full-page images. */
  fullPageWrites: string;
  events: number;
  /** WAL bytes per event of each stage of an event's life (pg_wal_lsn_diff around the stage). */
  bytesPerEvent: { enqueue: number; relay: number; purge: number; vacuum: number; total: number };
  /** SendMessageBatch requests per event (the relay's SQS client, counted by a middleware). */
  sqsRequestsPerEvent: number;
  /**
   * Dead row versions VACUUM itself removed per event (its VERBOSE "tuples: N removed"). Not every dead version:
   * page reads (the claim's, the purge's) prune many first, which costs WAL in their stage instead. Each event
   * leaves two dead versions in `keep` (the marked row's old version, then the purged row) and one in `delete`.
   */
  deadTuplesPerEvent?: number;
  /**
   * Where each stage's bytes go: WAL record types by bytes per event (pg_walinspect's pg_get_wal_stats over the
   * stage), those of at least 1 B per event; absent where the extension is not available.
   */
  records?: Record<WalStage, WalRecordShare[]>;
}

export type WalStage = "enqueue" | "relay" | "purge" | "vacuum";

export interface WalRecordShare {
  /** resource manager/record type, e.g. Heap/INSERT, Btree/INSERT_LEAF, Heap/LOCK. */
  type: string;
  count: number;
  bytesPerEvent: number;
}

/** ~180-byte order payload and a traceparent header: the backlog's event (lib/benchDatabase.ts). */
function orderEvent(n: number, aggregates: number) {
  return {
    aggregateType: "order",
    aggregateId: `order-${n % aggregates}`,
    eventType: "order.created",
    payload: {
      orderId: n,
      customer: `c-${n % 997}`,
      total: 4200,
      currency: "EUR",
      lines: [{ sku: `sku-${n % 31}`, qty: 2, price: 2100 }],
    },
    headers: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" },
  };
}

/**
 * Where the next WAL record will go. Not pg_current_wal_lsn(), which is where WAL has been *written* to: with
 * synchronous_commit off (the bench's server) that lags what transactions have already inserted by up to
 * wal_writer_delay, and a stage's last records were counted in the next stage (seen with pg_walinspect: the
 * enqueue's inserts in the relay stage, the purge's deletes in vacuum's).
 */
export async function lsn(pool: pg.Pool): Promise<string> {
  const { rows } = await pool.query<{ lsn: string }>("select pg_current_wal_insert_lsn()::text as lsn");
  return rows[0]?.lsn ?? "0/0";
}

/** VACUUM (VERBOSE) on one session: its WAL range and the dead row versions it reports removing. */
async function vacuum(pool: pg.Pool): Promise<{ from: string; to: string; removed: number }> {
  const client = await pool.connect();
  let removed = 0;
  const onNotice = (notice: { message?: string }) => {
    const match = /tuples: (\d+) removed/.exec(notice.message ?? "");
    if (match !== null) removed += Number(match[1]);
  };
  client.on("notice", onNotice);
  try {
    const from = await lsn(pool);
    await client.query("vacuum (verbose) outbox_events");
    return { from, to: await lsn(pool), removed };
  } finally {
    client.off("notice", onNotice);
    client.release();
  }
}

/**
 * The WAL records between two positions by type (pg_walinspect, in contrib since Postgres 15). The range must
 * be flushed before the function reads it: with synchronous_commit off (the bench's server) a commit does not
 * wait for that, so one transaction with it on writes and flushes its commit record, which lies past `to`.
 */
async function walRecords(
  pool: pg.Pool,
  from: string,
  to: string,
  events: number,
): Promise<WalRecordShare[] | undefined> {
  await withTransaction(pool, (client) =>
    client.query("select set_config('synchronous_commit', 'on', true), pg_current_xact_id()"),
  );
  const found = await pool
    .query<{ type: string; count: string; bytes: string }>(
      `select "resource_manager/record_type" as type, count::text, combined_size::text as bytes
       from pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, true)
       where combined_size >= $3::bigint
       order by combined_size desc`,
      [from, to, events],
    )
    .catch(() => undefined); // no pg_walinspect (a managed server): the totals stand without the breakdown
  if (found === undefined) return undefined;
  const { rows } = found;
  return rows.map((row) => ({
    type: row.type,
    count: Number(row.count),
    bytesPerEvent: Number(row.bytes) / events,
  }));
}

export async function lsnDiff(pool: pg.Pool, range: { from: string; to: string }): Promise<number> {
  const { rows } = await pool.query<{ bytes: string }>(
    "select pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::bigint as bytes",
    [range.from, range.to],
  );
  return Number(rows[0]?.bytes ?? 0);
}

/** The two vacuum runs' records as one list: same types summed. */
function mergeRecords(shares: WalRecordShare[]): WalRecordShare[] {
  const byType = new Map<string, WalRecordShare>();
  for (const share of shares) {
    const seen = byType.get(share.type);
    byType.set(
      share.type,
      seen === undefined
        ? share
        : {
            type: share.type,
            count: seen.count + share.count,
            bytesPerEvent: seen.bytesPerEvent + share.bytesPerEvent,
          },
    );
  }
  return [...byType.values()].sort((a, b) => b.bytesPerEvent - a.bytesPerEvent);
}

/**
 * (13) What one event costs the database in WAL, stage by stage, as the shipped code writes it: `enqueue()` in
 * transactions of 10 events (the producer), the relay draining them (claim + record: one UPDATE per round), the
 * purge deleting them once published, and the VACUUM that reclaims the dead rows (autovacuum is off on the table
 * during the run, so its work lands in that stage and nowhere else). WAL is the part of an event's cost that is
 * written, shipped to replicas and (on Aurora) billed as I/O; it is measured exactly from the WAL position, on a
 * server with no other writer. The bench's server runs with full_page_writes off (reported): RDS PostgreSQL adds
 * an 8 KiB image for the first change of each page after a checkpoint (Aurora's storage writes none), which a
 * busy table amortizes over the many events a page holds.
 *
 * Per retention mode (OUTBOX_RETENTION, migration 0011): `keep` marks, then the purge deletes; `delete` deletes in
 * the relay's round, so its purge stage finds nothing. VACUUM runs after the relay and again after the purge (each
 * mode's dead versions are reclaimed where they arise); the vacuum stage is the sum of both, and the dead row
 * versions both report removing give `deadTuplesPerEvent`. The purge stage is the purge's DELETE statement run to
 * exhaustion with a cutoff in the future (no ageing UPDATE, which would add dead versions of its own).
 */
export async function measureWalPerEvent(
  pool: pg.Pool,
  endpoint: BenchSqsEndpoint,
  events = 10_000,
  aggregates = 1_000,
  retention: Retention = "keep",
): Promise<WalPerEventRun> {
  await resetOutbox(pool);
  await endpoint.setLatency(0);
  const { rows: setting } = await pool.query<{ full_page_writes: string }>("show full_page_writes");
  await pool.query("alter table outbox_events set (autovacuum_enabled = off)");
  const sqs = relaySqsClient(endpoint.url, DEFAULT_RELAY_OPTIONS.publishTimeoutMs);
  let sendBatches = 0;
  sqs.middlewareStack.add(
    (next, context) => (args) => {
      if (context.commandName === "SendMessageBatchCommand") sendBatches++;
      return next(args);
    },
    { step: "initialize", name: "countSendMessageBatch" },
  );
  try {
    // Created before the first stage's start (its own WAL stays out of every stage); absent on a server without
    // the contrib module, where the breakdown is left out.
    await pool.query("create extension if not exists pg_walinspect").catch(() => {});
    const records: Partial<Record<WalStage, WalRecordShare[]>> = {};
    /** A stage's range: its bytes now, its records read right after (before the next stage starts). */
    const stage = async (name: WalStage, range: { from: string; to: string }) => {
      const bytes = await lsnDiff(pool, range);
      // pg_get_wal_stats refuses an empty range (delete retention's purge stage writes nothing).
      const found = bytes > 0 ? await walRecords(pool, range.from, range.to, events) : [];
      if (found !== undefined) records[name] = mergeRecords([...(records[name] ?? []), ...found]);
      return bytes;
    };

    let from = await lsn(pool);
    const perTransaction = 10;
    for (let n = 0; n < events; n += perTransaction) {
      const batch = Array.from({ length: Math.min(perTransaction, events - n) }, (_, i) =>
        orderEvent(n + i, aggregates),
      );
      await withTransaction(pool, (client) => enqueue(client, batch));
    }
    const enqueueBytes = await stage("enqueue", { from, to: await lsn(pool) });

    const destination = sqsFifoDestination(sqs, { queueUrl: await createBenchQueue(sqs, "wal") });
    from = await lsn(pool);
    const summary = await runRelay(
      { pool, destination, deadline: Date.now() + 600_000 },
      { ...DEFAULT_RELAY_OPTIONS, mode: "drain", retention },
    );
    if (summary.published !== events) {
      throw new Error(
        `WAL run published ${summary.published} of ${events} (${summary.lastError ?? "no error"})`,
      );
    }
    const relayBytes = await stage("relay", { from, to: await lsn(pool) });

    const afterRelay = await vacuum(pool);
    const afterRelayBytes = await stage("vacuum", afterRelay);

    from = await lsn(pool);
    const names = outboxNames();
    const before = new Date(Date.now() + 3_600_000);
    const limit: number = DEFAULT_PURGE_OPTIONS.batchSize;
    let purged = 0;
    for (let deleted = limit; deleted === limit; purged += deleted) {
      deleted = await purgePublished(pool, names, { before, limit });
    }
    const expectPurged = retention === "keep" ? events : 0;
    if (purged !== expectPurged) throw new Error(`WAL run purged ${purged} of ${expectPurged}`);
    const purgeBytes = await stage("purge", { from, to: await lsn(pool) });

    const afterPurge = await vacuum(pool);
    const vacuumBytes = afterRelayBytes + (await stage("vacuum", afterPurge));

    const per = (bytes: number) => bytes / events;
    return {
      fullPageWrites: setting[0]?.full_page_writes ?? "unknown",
      events,
      bytesPerEvent: {
        enqueue: per(enqueueBytes),
        relay: per(relayBytes),
        purge: per(purgeBytes),
        vacuum: per(vacuumBytes),
        total: per(enqueueBytes + relayBytes + purgeBytes + vacuumBytes),
      },
      sqsRequestsPerEvent: sendBatches / events,
      deadTuplesPerEvent: (afterRelay.removed + afterPurge.removed) / events,
      retention,
      ...(Object.keys(records).length === 4
        ? { records: records as Record<WalStage, WalRecordShare[]> }
        : {}),
    };
  } finally {
    sqs.destroy();
    await pool.query("alter table outbox_events reset (autovacuum_enabled)");
  }
}

export function walPerEventMarkdown(runs: WalPerEventRun[]): string {
  const b = (value: number) => formatNumber(value, 0);
  return markdownTable(
    [
      "retention",
      "WAL",
      "enqueue",
      "relay (claim + record)",
      "purge",
      "vacuum",
      "total per event",
      "SendMessageBatch per event",
      "dead tuples per event",
    ],
    runs.map((run) => [
      run.retention ?? "keep",
      run.fullPageWrites,
      `${b(run.bytesPerEvent.enqueue)} B`,
      `${b(run.bytesPerEvent.relay)} B`,
      `${b(run.bytesPerEvent.purge)} B`,
      `${b(run.bytesPerEvent.vacuum)} B`,
      `**${b(run.bytesPerEvent.total)} B**`,
      formatNumber(run.sqsRequestsPerEvent, 3),
      run.deadTuplesPerEvent === undefined ? "" : formatNumber(run.deadTuplesPerEvent, 2),
    ]),
  );
}
