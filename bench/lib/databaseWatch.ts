import pg from "pg";
import { epochNow } from "./threadPauses.ts";

/** Something the database was doing from `from` to `to` (epoch ms, as sampled: ± one sampling interval). */
export interface DatabaseCondition {
  from: number;
  to: number;
  what: string;
}

export interface DatabaseView {
  sampleEveryMs: number;
  samples: number;
  /** Autovacuum / autoanalyze of the outbox table, checkpoints in progress, lock waits, as intervals. */
  conditions: DatabaseCondition[];
  /** pg_stat_user_tables counters of the outbox table that moved during the watch (start → end). */
  counters: Record<string, { start: number; end: number }>;
  /** The relay's claim statement's plan (EXPLAIN, no ANALYZE), each time it differed from the one before. */
  plans: { at: number; plan: string }[];
}

const SAMPLE_EVERY_MS = 100;
/** The claim's plan is re-read this often, and whenever an ANALYZE of the table completed. */
const EXPLAIN_EVERY_SAMPLES = 10;

/**
 * The database's side of a latency run, sampled every 100 ms on a session of its own: autovacuum and
 * autoanalyze of the outbox table (pg_stat_activity's autovacuum workers, pg_stat_progress_vacuum and _analyze),
 * checkpoints in progress (the checkpointer's wait event, and pg_stat_checkpointer, or pg_stat_bgwriter before
 * Postgres 17), lock waits of any session (pg_locks not granted, with the blocking pid's query), and the plan of
 * the relay's own claim statement after each ANALYZE. What each view shows:
 * https://www.postgresql.org/docs/current/monitoring-stats.html and .../progress-reporting.html.
 */
export async function watchDatabase(
  databaseUrl: string,
  table: string,
  claimStatement: () => { text: string; values: unknown[] } | undefined,
): Promise<{ stop(): Promise<DatabaseView> }> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: "bench-watch" });
  await client.connect();
  client.on("error", () => {});
  const { rows: versions } = await client.query<{ checkpointer: boolean }>(
    "select to_regclass('pg_catalog.pg_stat_checkpointer') is not null as checkpointer",
  );
  const checkpoints = versions[0]?.checkpointer
    ? "(select num_timed + num_requested from pg_stat_checkpointer)"
    : "(select checkpoints_timed + checkpoints_req from pg_stat_bgwriter)";
  const sampleSql = `
    select s.n_live_tup::float8 as live, s.n_dead_tup::float8 as dead,
           s.n_mod_since_analyze::float8 as mod_since_analyze, s.n_ins_since_vacuum::float8 as ins_since_vacuum,
           s.autovacuum_count::float8 as autovacuums, s.autoanalyze_count::float8 as autoanalyzes,
           s.vacuum_count::float8 as vacuums, s.analyze_count::float8 as analyzes,
           ${checkpoints}::float8 as checkpoints,
           array(
             select 'autovacuum worker: ' || a.query || coalesce(' (vacuum phase ' || v.phase || ')', '')
                    || coalesce(' (analyze phase ' || z.phase || ')', '')
             from pg_stat_activity a
             left join pg_stat_progress_vacuum v on v.pid = a.pid
             left join pg_stat_progress_analyze z on z.pid = a.pid
             where a.backend_type = 'autovacuum worker' and a.query <> ''
           ) as autovacuum,
           array(
             select 'checkpoint in progress (' || a.wait_event || ')'
             from pg_stat_activity a
             where a.backend_type = 'checkpointer' and a.wait_event is distinct from 'CheckpointerMain'
               and a.wait_event is not null
           ) as checkpointer,
           array(
             select distinct 'lock wait: ' || coalesce(nullif(w.application_name, ''), w.backend_type) || ' waits on '
                    || w.wait_event_type || ':' || w.wait_event || ' held by '
                    || coalesce((select coalesce(nullif(b.application_name, ''), b.backend_type) || ' ('
                                        || left(b.query, 60) || ')'
                                 from pg_stat_activity b where b.pid = any(pg_blocking_pids(w.pid)) limit 1), '?')
             from pg_stat_activity w
             where w.wait_event_type = 'Lock'
           ) as locks
    from pg_stat_user_tables s
    where s.relid = $1::regclass`;
  const open = new Map<string, DatabaseCondition>();
  const conditions: DatabaseCondition[] = [];
  const plans: DatabaseView["plans"] = [];
  let first: Record<string, number> | undefined;
  let last: Record<string, number> | undefined;
  let samples = 0;
  let stopped = false;

  const explain = async () => {
    const claim = claimStatement();
    if (claim === undefined) return;
    try {
      const { rows } = await client.query<{ "QUERY PLAN": { Plan: PlanNode }[] }>(
        `explain (format json) ${claim.text}`,
        claim.values,
      );
      const root = rows[0]?.["QUERY PLAN"][0];
      if (root === undefined) return;
      const plan = outline(root.Plan);
      if (plans.at(-1)?.plan !== plan) plans.push({ at: epochNow(), plan });
    } catch {
      // The claim's parameters can go stale (a cursor past the last aggregate): the next sample tries again.
    }
  };

  const sample = async () => {
    const at = epochNow();
    const { rows } = await client.query(sampleSql, [table]);
    const row = rows[0] as Record<string, unknown> | undefined;
    if (row === undefined) return;
    samples++;
    const counters: Record<string, number> = {};
    for (const [name, value] of Object.entries(row)) if (typeof value === "number") counters[name] = value;
    const analyzed = last !== undefined && counters.autoanalyzes !== last.autoanalyzes;
    const analyzedByHand = last !== undefined && counters.analyzes !== last.analyzes;
    if (last !== undefined && counters.checkpoints !== last.checkpoints) note(at, "checkpoint counted");
    if (last !== undefined && counters.autovacuums !== last.autovacuums)
      note(at, "autovacuum of the outbox done");
    if (analyzed) note(at, "autoanalyze of the outbox done");
    first ??= counters;
    last = counters;
    const now = new Set([
      ...(row.autovacuum as string[]),
      ...(row.checkpointer as string[]),
      ...(row.locks as string[]),
    ]);
    for (const what of now) {
      const condition = open.get(what);
      if (condition === undefined) {
        const opened = { from: at, to: at, what };
        open.set(what, opened);
        conditions.push(opened);
      } else {
        condition.to = at;
      }
    }
    for (const what of [...open.keys()]) if (!now.has(what)) open.delete(what);
    if (analyzed || analyzedByHand || samples % EXPLAIN_EVERY_SAMPLES === 1) await explain();
  };
  const note = (at: number, what: string) => conditions.push({ from: at, to: at, what });

  const loop = (async () => {
    while (!stopped) {
      const started = epochNow();
      await sample().catch(() => {});
      const wait = SAMPLE_EVERY_MS - (epochNow() - started);
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
  })();

  return {
    async stop() {
      stopped = true;
      await loop;
      await client.end();
      const counters: DatabaseView["counters"] = {};
      for (const [name, start] of Object.entries(first ?? {})) {
        const end = last?.[name] ?? start;
        counters[name] = { start, end };
      }
      return { sampleEveryMs: SAMPLE_EVERY_MS, samples, conditions, counters, plans };
    },
  };
}

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Relation Name"?: string;
  Plans?: PlanNode[];
}

/** `Limit > LockRows > Nested Loop [Index Scan using outbox_claim_heads; ...]`: node types and indexes. */
function outline(node: PlanNode): string {
  const label = [node["Node Type"], node["Index Name"] ? `using ${node["Index Name"]}` : undefined]
    .filter((part) => part !== undefined)
    .join(" ");
  const children = (node.Plans ?? []).map(outline);
  if (children.length === 0) return label;
  return `${label} > ${children.length === 1 ? children[0] : `[${children.join("; ")}]`}`;
}
