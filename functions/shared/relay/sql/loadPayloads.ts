import type { Queryable } from "../../db/session.ts";
import { isRowDataError, isStatementCanceled } from "../../db/sqlstate.ts";
import type { OutboxNames } from "../../outbox/names.ts";
import { CLAIM_CHECK_HINT } from "../../outbox/payloadPointer.ts";
import { LOAD_TIMEOUT_ERROR } from "../loadBudget.ts";

export interface PayloadLimits {
  /** The queue's MaximumMessageSize. */
  maxMessageBytes: number;
  /** Payload and header bytes one round loads at most; the first sendable row loads whatever its size. */
  budgetBytes: number;
  /**
   * Whether the first sendable row may load past the budget (default true). False when another round of this
   * process already holds such a row: with the claim check a row can be 64 MiB, and parallel rounds each
   * loading one would multiply that (engine.ts, OversizeGate).
   */
  loadOversized?: boolean;
  /**
   * The walk's statement_timeout when the round may load a row past its budget (relay/loadBudget.ts), and the
   * round's own to restore after it. Unset: the round's statement_timeout throughout.
   */
  timeouts?: { statementMs: number; walkMs: number };
}

/**
 * What became of one claimed row's payload and headers:
 * - `loaded`: within the limits and the budget; `payload` is jsonb's text form (`{"a": 1}`), not parsed JSON, so
 *   numbers keep their precision (the publisher compacts it); `bytes` is what it counted against the budget.
 * - `unsendable`: certainly over the queue's limit (found from sizes computed in SQL, the text never left the
 *   database), or the database could not produce its text at all; `error` says which and by how much.
 * - `overBudget`: sendable, but the round's byte budget was spent by the rows before it; left for a later round.
 * - `timedOut`: the walk that was to load it (it first) hit its statement_timeout: the database or the network
 *   too slow for its size. Not the row's fault: the relay counts a transient failure, never a dead letter.
 */
export type LoadedPayload =
  | { id: string; status: "loaded"; payload: string; headers: unknown; bytes: number }
  | { id: string; status: "unsendable"; error: string }
  | { id: string; status: "overBudget" }
  | { id: string; status: "timedOut"; error: string };

/**
 * jsonb never takes more than 6 bytes per byte of its compact JSON text (measured worst case: an array of
 * zeros, 12 bytes per `0,`), and TOAST compression only makes it smaller. A payload stored in more than
 * 8 × the limit (a margin over 6) is therefore over the limit without its text being computed: that matters
 * for a hand-inserted 200 MB jsonb, whose text would cost the database a second 200 MB to produce.
 */
const STORED_BYTES_PER_TEXT_BYTE = 8;

/**
 * The most JSON text the relay asks the server to print for one row whose size it does not know from the insert
 * trigger (text_bytes_bound null: inserted before migration 0006 or with its trigger disabled): 64 MiB, about
 * 1.2-2 s of printing (35-54 MB/s measured). Printing is the one thing a backend does not stop for
 * statement_timeout or pg_cancel_backend (migration 0006: 17 s into a 2 s timeout), so a row is printed only
 * once its text is bounded below this ({{related:text_bound}} in 0006, a jsonpath walk over its numbers: 0.2 s
 * for `[1e131000 x 7000]`); a row whose bound is over it is dead-lettered unprinted, naming the bound. Rows the
 * trigger bounded (at most 1.5 MiB of text, or it refused them) are printed as before. Same cap as the trigger's.
 */
export const PRINT_CAP_BYTES = 67_108_864;

interface Row {
  id: string;
  payload_stored_bytes: number;
  headers_stored_bytes: number;
  /** For a row inserted around the insert trigger (text_bytes_bound null): the bound on its text; else null. */
  payload_bound?: string | null;
  headers_bound?: string | null;
  payload_bytes: number | null;
  header_bytes: number | null;
  load: boolean;
  payload: string | null;
  headers: unknown;
}

/**
 * Sizes the claimed rows (`ids`, in seq order) in SQL and loads the payload and headers of those that are
 * sendable and fit the round's byte budget, in that order (a prefix: once the budget is spent, later rows wait, so a round's memory
 * is bounded by bytes, not only by RELAY_BATCH_SIZE). Rows of the common kind (small, uncompressed) are settled
 * by one plain statement (`loadDirectly`); the walk described here takes over from the first row that is not.
 *
 * Why sizes first, in SQL: before this, `payload::text` of every claimed row came to the relay before any size
 * check, so one hand-inserted 200 MB jsonb crashed the Lambda on every invocation. Which size:
 * - the compact JSON text is what SQS receives; jsonb's text form (`octet_length(payload::text)`) is that plus
 *   one space after every `,` and `:`, so at most 1.5 × it (`[0, 0]`: 3 bytes per element, compact 2). A text
 *   over 1.5 × the limit is certainly too big; anything smaller is loaded (≤ 1.5 × limit) and measured exactly.
 * - `pg_column_size` (the stored, possibly compressed size) is no bound on the text: numbers such as 1e-300 are
 *   a few bytes stored and 300 characters printed (a 16 KB array of them printed 304 KB), and compression works
 *   the other way. It is used only as the cheap one-sided test above (STORED_BYTES_PER_TEXT_BYTE).
 * - headers become message attributes: per header its name, `String` and its value, summed in SQL with
 *   jsonb_each_text; a header set over the limit is never loaded either.
 * The budget: a recursive walk over `ids`, one row per step (a primary-key probe for the id at that position of
 * the array: no scan, no join to a row-numbered CTE, which Postgres re-ran at every step), carrying the bytes loaded
 * so far; it stops at the first sendable row that does not fit (so the loaded rows are a prefix, and at least one
 * when `loadFirst`). Each visited row's text is printed once (`offset 0` keeps the lateral from being inlined,
 * which printed it up to four times) and kept only if loaded. Why a walk and not a window over every claimed
 * row's size: printing jsonb is what costs, ~35 MB/s on the bench machine, so sizing all 100 rows of 1 MiB
 * events to load 32 took 5-9 s, past the 5 s statement timeout; the walk prints only the rows it loads plus
 * one, 1.2-1.5 s for those 32 MiB (about what fetching their text alone costs).
 *
 * A row whose text the database cannot produce (e.g. an expanding payload printing over 1 GB fails with
 * SQLSTATE 54000) fails the whole statement; the statement runs under a savepoint, and on a row-data error
 * (classes 22 and 54) each row is retried alone so only the culprit is reported unsendable. Other errors
 * (timeouts, lost connections) fail the round as before: they are not the row's fault. What no statement here
 * does any more is print a row whose text is unbounded: before migration 0006 a payload small when stored but
 * huge when printed (`[1e131000 x 7000]`: 1.9 KB, 917 MB of text) kept the backend printing, and holding the
 * claim's locks, long after the relay gave up on the statement; see PRINT_CAP_BYTES.
 */
export async function loadPayloads(
  db: Queryable,
  names: OutboxNames,
  ids: readonly string[],
  limits: PayloadLimits,
): Promise<LoadedPayload[]> {
  if (ids.length === 0) return [];
  const direct = await loadDirectly(db, names, ids, limits);
  if (direct.settled === ids.length) return direct.results;
  return [
    ...direct.results,
    ...(await walkUnderSavepoints(
      db,
      names,
      ids.slice(direct.settled),
      limits,
      limits.budgetBytes - direct.loadedBytes,
      !direct.results.some((row) => row.status === "loaded") && (limits.loadOversized ?? true),
    )),
  ];
}

/**
 * Text bytes one stored byte of uncompressed jsonb can print as, at most: a numeric of weight 32767 (131,072
 * digits before the point) and display scale 16383 (the storage format's limits) is 10 bytes stored (4-byte
 * varlena header, sign/scale, weight, one digit group) plus a 4-byte JEntry in its container, and prints
 * 147,457 characters plus `, `: 147,459 / 14 = 10,533. Measured: 8,192 per stored byte for an array of three
 * such numbers, 6,703 for one alone (test/relay/loadPayloads.direct.test.ts checks the bound). Strings print at most
 * 6 per byte (`\u0001`), everything else less.
 */
export const MAX_TEXT_BYTES_PER_STORED_BYTE = 10_534;

/**
 * The largest uncompressed payload or header set the direct statement prints: 64 KiB × 10,534 = 690 MB of
 * text at most, under the 1 GB that makes Postgres refuse to print it (SQLSTATE 54000). So the direct statement
 * cannot fail for a row's data, and runs without a savepoint. A compressed value's raw size is not known
 * without decompressing it (lz4 stores ~250:1), so compressed rows always take the walk.
 */
export const DIRECT_MAX_STORED_BYTES = 65_536;

interface DirectRow extends Row {
  direct: boolean;
}

/**
 * The common case in one statement, no savepoint: the claimed rows, in seq order, for as long as each is
 * stored uncompressed within DIRECT_MAX_STORED_BYTES (and within the walk's 8 × limit gate, so every row the
 * direct statement prints the walk would have printed too) and, when sendable, takes at most an equal share of
 * the budget (`budgetBytes / ids.length`, so the rows loaded directly total at most the budget whatever their
 * number). Each row's text is printed once and leaves the database only when it fits its share: memory stays
 * bounded by the budget, an oversized row's text never leaves the database. At the first row that does not
 * qualify (compressed, larger, over its share, or gone) the direct statement's results stop, and the walk takes
 * over from that row with what is left of the budget. Up to that row the walk would have made the same
 * decisions: every row before it fitted the budget, so the walk would not have stopped earlier.
 *
 * Why: for a claim of 100 small rows the walk took 0.72 ms of execution + 0.25 ms planning (one recursive step
 * per row) and two SAVEPOINT round trips besides; this statement 0.51 + 0.15 ms and none, and the relay's load
 * phase per round fell by 24-60 % in each of three bench runs (docs/benchmarks.md, "The payload load's direct
 * statement"). Each lateral is fenced (`offset 0`): inlined, the header sizing ran seven times per row.
 * Why an exact size against a share, not a bound computed from stored sizes: the only sound bound is
 * MAX_TEXT_BYTES_PER_STORED_BYTE, which would let a 32 MiB budget cover 3 KB of stored jsonb.
 * Its cost when it does not help: the rows after the first that does not qualify are printed for nothing, at
 * most DIRECT_MAX_STORED_BYTES × 10,534 each, the same worst case as the walk printing a batch of unsendable rows.
 */
async function loadDirectly(
  db: Queryable,
  names: OutboxNames,
  ids: readonly string[],
  limits: PayloadLimits,
): Promise<{ results: LoadedPayload[]; settled: number; loadedBytes: number }> {
  const { rows } = await db.query<DirectRow>(
    `select o.id, pg_column_size(o.payload) as payload_stored_bytes, pg_column_size(o.headers) as headers_stored_bytes,
            g.direct, s.payload_bytes::integer, s.header_bytes, f.fits as load,
            case when f.fits then s.text end as payload, case when f.fits then o.headers end as headers
     from ${names.qualified} as o
     cross join lateral (
       select o.text_bytes_bound is not null
              and pg_column_compression(o.payload) is null and pg_column_compression(o.headers) is null
              and pg_column_size(o.payload) <= $2::bigint and pg_column_size(o.headers) <= $2::bigint as direct
       offset 0
     ) as g
     cross join lateral (
       select t.text, octet_length(t.text)::bigint as payload_bytes,
              case when g.direct then (
                select coalesce(sum(octet_length(e.key) + 6 + coalesce(octet_length(e.value), 0)), 0)
                from jsonb_each_text(o.headers) as e
              ) end as header_bytes
       from (select case when g.direct then o.payload::text end as text offset 0) as t
       offset 0
     ) as s
     cross join lateral (
       select coalesce(s.payload_bytes * 2 <= $3::bigint * 3 and s.header_bytes <= $3::bigint
                       and s.payload_bytes + s.header_bytes <= $4::bigint, false) as fits
       offset 0
     ) as f
     where o.id = any($1::uuid[])`,
    [
      ids,
      Math.min(DIRECT_MAX_STORED_BYTES, STORED_BYTES_PER_TEXT_BYTE * limits.maxMessageBytes),
      limits.maxMessageBytes,
      Math.floor(limits.budgetBytes / ids.length),
    ],
  );
  const byId = new Map(rows.map((row) => [row.id, row]));
  const results: LoadedPayload[] = [];
  let loadedBytes = 0;
  for (const id of ids) {
    const row = byId.get(id);
    if (row === undefined || !row.direct) break;
    const result = toLoaded(row, limits);
    // Sendable but over its share: the walk decides, with the budget that is left.
    if (result.status === "overBudget") break;
    if (result.status === "loaded") loadedBytes += result.bytes;
    results.push(result);
  }
  return { results, settled: results.length, loadedBytes };
}

/**
 * The walk (see loadPayloads' comment) under a savepoint, falling back to one row at a time on a row-data
 * error; `budgetBytes` and `loadFirst` carry on from the rows the direct statement settled.
 */
export async function walkUnderSavepoints(
  db: Queryable,
  names: OutboxNames,
  ids: readonly string[],
  limits: PayloadLimits,
  budgetBytes: number,
  loadFirst: boolean,
): Promise<LoadedPayload[]> {
  // Only the walk that may load a row past the budget gets the longer timeout; set before the savepoints, so a
  // rollback to one keeps it, and restored after (transaction-local either way).
  const timeouts = loadFirst ? limits.timeouts : undefined;
  if (timeouts !== undefined) await setStatementTimeout(db, timeouts.walkMs);
  const loaded = await walkOrRowByRow(db, names, ids, limits, budgetBytes, loadFirst);
  if (timeouts !== undefined) await setStatementTimeout(db, timeouts.statementMs);
  return loaded;
}

async function setStatementTimeout(db: Queryable, ms: number): Promise<void> {
  await db.query("select set_config('statement_timeout', $1, true)", [`${ms}ms`]);
}

async function walkOrRowByRow(
  db: Queryable,
  names: OutboxNames,
  ids: readonly string[],
  limits: PayloadLimits,
  budgetBytes: number,
  loadFirst: boolean,
): Promise<LoadedPayload[]> {
  await db.query("savepoint load_payloads");
  try {
    const rows = await query(db, names, ids, limits, budgetBytes, loadFirst);
    await db.query("release savepoint load_payloads");
    return rows.map((row) => toLoaded(row, limits));
  } catch (error) {
    if (isStatementCanceled(error)) {
      await db.query("rollback to savepoint load_payloads");
      return timedOut(db, names, ids, limits, loadFirst);
    }
    if (!isRowDataError(error)) throw error;
    await db.query("rollback to savepoint load_payloads");
  }
  // One row at a time, each under its own savepoint, sharing what is left of the budget.
  const loaded: LoadedPayload[] = [];
  let remaining = budgetBytes;
  let loadedAny = !loadFirst;
  for (const [index, id] of ids.entries()) {
    await db.query("savepoint load_payload");
    try {
      const [row] = await query(db, names, [id], limits, remaining, !loadedAny);
      await db.query("release savepoint load_payload");
      if (row === undefined) continue;
      const result = toLoaded(row, limits);
      if (result.status === "loaded") {
        remaining -= result.bytes;
        loadedAny = true;
      }
      loaded.push(result);
    } catch (error) {
      if (isStatementCanceled(error)) {
        await db.query("rollback to savepoint load_payload");
        loaded.push(...(await timedOut(db, names, ids.slice(index), limits, !loadedAny)));
        return loaded;
      }
      if (!isRowDataError(error)) throw error;
      await db.query("rollback to savepoint load_payload");
      const code = (error as { code?: string }).code;
      loaded.push({
        id,
        status: "unsendable",
        error: `payload: the database could not produce its JSON text: ${(error as Error).message} (SQLSTATE ${code})`,
      });
    }
  }
  return loaded;
}

/**
 * The walk over `ids` hit its statement_timeout. The row it began with takes the failure: a walk loads a row past
 * the budget only as its first sendable row (the others load within the budget the timeouts are sized for), and
 * the row that waits longest for its group is the one to name. The rest are held for the next round; the named
 * row is in backoff then, so a different row leads that walk. Its size comes from the insert trigger's bound (a
 * column read, nothing printed) so the error says how much was to load.
 */
async function timedOut(
  db: Queryable,
  names: OutboxNames,
  ids: readonly string[],
  limits: PayloadLimits,
  loadFirst: boolean,
): Promise<LoadedPayload[]> {
  const [first, ...rest] = ids;
  if (first === undefined) return [];
  const { rows } = await db.query<{ bound: string | null; stored: number }>(
    `select text_bytes_bound::text as bound, pg_column_size(payload) as stored from ${names.qualified} where id = $1`,
    [first],
  );
  const size =
    rows[0]?.bound === null || rows[0]?.bound === undefined
      ? `${rows[0]?.stored ?? "?"} bytes stored`
      : `up to ${rows[0].bound} bytes of JSON text`;
  const ms = loadFirst && limits.timeouts !== undefined ? limits.timeouts.walkMs : undefined;
  const error =
    `${LOAD_TIMEOUT_ERROR} the load's statement_timeout${ms === undefined ? "" : ` of ${ms} ms`} ` +
    `(${size}${ids.length > 1 ? `, loaded with up to ${ids.length - 1} rows after it` : ""}): the database or ` +
    "the network too slow for its size; retried with backoff, never dead-lettered (docs/large-payloads.md)";
  return [
    { id: first, status: "timedOut", error },
    ...rest.map((id) => ({ id, status: "overBudget" as const })),
  ];
}

async function query(
  db: Queryable,
  names: OutboxNames,
  ids: readonly string[],
  limits: PayloadLimits,
  budgetBytes: number,
  loadFirst: boolean,
): Promise<Row[]> {
  const { rows } = await db.query<Row>(
    `with recursive walk as (
       select 0::bigint as rn, null::uuid as id, 0 as payload_stored_bytes, 0 as headers_stored_bytes,
              null::bigint as payload_bound, null::bigint as headers_bound, 0::bigint as payload_bytes, 0::bigint as header_bytes, false as load, null::text as payload,
              null::jsonb as headers, 0::bigint as total, 0::bigint as loaded, true as go_on
       union all
       select w.rn + 1, s.id, s.payload_stored_bytes, s.headers_stored_bytes, s.payload_bound, s.headers_bound,
              k.payload_bytes, s.header_bytes, d.load,
              case when d.load then s.text end, case when d.load then s.headers end,
              w.total + case when d.load then k.payload_bytes + s.header_bytes else 0 end,
              w.loaded + d.load::integer,
              not (k.sendable and not d.load)
       from walk as w
       cross join lateral (
         select o.id, pg_column_size(o.payload) as payload_stored_bytes,
                pg_column_size(o.headers) as headers_stored_bytes, b.payload_bound, b.headers_bound,
                case when pg_column_size(o.payload) <= $2::bigint and coalesce(b.payload_bound <= $6::bigint, true)
                     then o.payload::text end as text,
                case when pg_column_size(o.headers) <= $2::bigint and coalesce(b.headers_bound <= $6::bigint, true)
                     then (
                  select coalesce(sum(octet_length(h.key) + 6 + coalesce(octet_length(h.value), 0)), 0)
                  from jsonb_each_text(o.headers) as h
                ) end as header_bytes,
                o.headers
         from ${names.qualified} as o
         cross join lateral (
           select case when o.text_bytes_bound is null then ${names.related("text_bound")}(o.payload) end
                    as payload_bound,
                  case when o.text_bytes_bound is null then ${names.related("text_bound")}(o.headers) end
                    as headers_bound
           offset 0
         ) as b
         where o.id = ($1::uuid[])[w.rn + 1]
         offset 0
       ) as s
       cross join lateral (
         select octet_length(s.text)::bigint as payload_bytes,
                coalesce(octet_length(s.text)::bigint * 2 <= $3::bigint * 3 and s.header_bytes <= $3::bigint, false)
                  as sendable
       ) as k
       cross join lateral (
         select k.sendable
                and (w.total + k.payload_bytes + s.header_bytes <= $4::bigint or (w.loaded = 0 and $5::boolean))
                  as load
       ) as d
       where w.go_on and w.rn < cardinality($1::uuid[])
     )
     select id, payload_stored_bytes, headers_stored_bytes, payload_bound, headers_bound, payload_bytes::integer,
            header_bytes, load, payload, headers
     from walk
     where rn > 0
     order by rn`,
    [
      ids,
      STORED_BYTES_PER_TEXT_BYTE * limits.maxMessageBytes,
      limits.maxMessageBytes,
      budgetBytes,
      loadFirst,
      PRINT_CAP_BYTES,
    ],
  );
  return rows;
}

function toLoaded(row: Row, limits: PayloadLimits): LoadedPayload {
  const limit = limits.maxMessageBytes;
  const notLoaded = `; dead-lettered without loading it (${CLAIM_CHECK_HINT})`;
  // A JSON text that could print past the cap is never printed: named and dead-lettered from its bound alone.
  const unprinted = (what: string, bound: unknown): LoadedPayload => ({
    id: row.id,
    status: "unsendable",
    error:
      `${what} JSON text could be up to ${bound} bytes (numbers print in full), more than ` +
      `the ${PRINT_CAP_BYTES} the relay prints to size a row; not printed, dead-lettered without loading it`,
  });
  if (row.payload_bytes === null && overPrintCap(row.payload_bound))
    return unprinted("payload: its", row.payload_bound);
  if (row.header_bytes === null && overPrintCap(row.headers_bound))
    return unprinted("headers: their", row.headers_bound);
  if (row.payload_bytes === null) {
    return {
      id: row.id,
      status: "unsendable",
      error:
        `payload: stored as ${row.payload_stored_bytes} bytes of jsonb, which is more than ` +
        `${Math.floor(row.payload_stored_bytes / 6)} bytes of JSON, over the queue's limit of ${limit}${notLoaded}`,
    };
  }
  if (row.header_bytes === null) {
    return {
      id: row.id,
      status: "unsendable",
      error: `headers: stored as ${row.headers_stored_bytes} bytes of jsonb, over the queue's limit of ${limit}${notLoaded}`,
    };
  }
  const headerBytes = Number(row.header_bytes);
  if (row.payload_bytes * 2 > limit * 3) {
    return {
      id: row.id,
      status: "unsendable",
      error:
        `payload: its JSON text is ${row.payload_bytes} bytes (at least ${Math.ceil((row.payload_bytes * 2) / 3)} ` +
        `compacted), over the queue's limit of ${limit}${notLoaded}`,
    };
  }
  if (headerBytes > limit) {
    return {
      id: row.id,
      status: "unsendable",
      error: `headers: as SQS message attributes they take ${headerBytes} bytes, over the queue's limit of ${limit}${notLoaded}`,
    };
  }
  if (!row.load || row.payload === null) return { id: row.id, status: "overBudget" };
  return {
    id: row.id,
    status: "loaded",
    payload: row.payload,
    headers: row.headers,
    bytes: row.payload_bytes + headerBytes,
  };
}

function overPrintCap(bound: string | null | undefined): boolean {
  return bound !== null && bound !== undefined && BigInt(bound) > BigInt(PRINT_CAP_BYTES);
}
