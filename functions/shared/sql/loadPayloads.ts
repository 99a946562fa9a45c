import type { Queryable } from "../db.ts";
import type { OutboxNames } from "../identifiers.ts";

export interface PayloadLimits {
  /** The queue's MaximumMessageSize. */
  maxMessageBytes: number;
  /** Payload and header bytes one round loads at most; the first sendable row loads whatever its size. */
  budgetBytes: number;
}

/**
 * What became of one claimed row's payload and headers:
 * - `loaded`: within the limits and the budget; `payload` is jsonb's text form (`{"a": 1}`), not parsed JSON, so
 *   numbers keep their precision (the publisher compacts it); `bytes` is what it counted against the budget.
 * - `unsendable`: certainly over the queue's limit (found from sizes computed in SQL, the text never left the
 *   database), or the database could not produce its text at all; `error` says which and by how much.
 * - `overBudget`: sendable, but the round's byte budget was spent by the rows before it; left for a later round.
 */
export type LoadedPayload =
  | { id: string; status: "loaded"; payload: string; headers: unknown; bytes: number }
  | { id: string; status: "unsendable"; error: string }
  | { id: string; status: "overBudget" };

/**
 * jsonb never takes more than 6 bytes per byte of its compact JSON text (measured worst case: an array of
 * zeros, 12 bytes per `0,`), and TOAST compression only makes it smaller. A payload stored in more than
 * 8 × the limit (a margin over 6) is therefore over the limit without its text being computed: that matters
 * for a hand-inserted 200 MB jsonb, whose text would cost the database a second 200 MB to produce.
 */
const STORED_BYTES_PER_TEXT_BYTE = 8;

/** SQLSTATE classes the data of one row can raise while being sized or loaded: data exception, program limit. */
const ROW_DATA_ERROR = /^(22|54)/;

interface Row {
  id: string;
  payload_stored_bytes: number;
  headers_stored_bytes: number;
  payload_bytes: number | null;
  header_bytes: number | null;
  load: boolean;
  payload: string | null;
  headers: unknown;
}

/**
 * Sizes the claimed rows in SQL and loads the payload and headers of those that are sendable and fit the
 * round's byte budget, in seq order (a prefix: once the budget is spent, later rows wait, so a round's memory
 * is bounded by bytes, not only by RELAY_BATCH_SIZE).
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
 * The budget is a running sum over the sendable rows in seq order (a window: this statement locks nothing, the
 * claim already holds the rows). For loaded rows the text is computed twice, once to size it and once to send
 * it; the alternative, carrying the text through the window, would materialize every claimed payload in the
 * database's memory or on its disk. The size is cheap next to the publish (jsonb_out of 1 KB takes µs).
 *
 * A row whose text the database cannot produce (e.g. an expanding payload printing over 1 GB fails with
 * SQLSTATE 54000) fails the whole statement; the statement runs under a savepoint, and on a row-data error
 * (classes 22 and 54) each row is retried alone so only the culprit is reported unsendable. Other errors
 * (timeouts, lost connections) fail the round as before: they are not the row's fault.
 */
export async function loadPayloads(
  db: Queryable,
  names: OutboxNames,
  ids: readonly string[],
  limits: PayloadLimits,
): Promise<LoadedPayload[]> {
  if (ids.length === 0) return [];
  await db.query("savepoint load_payloads");
  try {
    const rows = await query(db, names, ids, limits, limits.budgetBytes, true);
    await db.query("release savepoint load_payloads");
    return rows.map((row) => toLoaded(row, limits));
  } catch (error) {
    if (!isRowDataError(error)) throw error;
    await db.query("rollback to savepoint load_payloads");
  }
  // One row at a time, each under its own savepoint, sharing what is left of the budget.
  const loaded: LoadedPayload[] = [];
  let remaining = limits.budgetBytes;
  let loadedAny = false;
  for (const id of ids) {
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

async function query(
  db: Queryable,
  names: OutboxNames,
  ids: readonly string[],
  limits: PayloadLimits,
  budgetBytes: number,
  loadFirst: boolean,
): Promise<Row[]> {
  const { rows } = await db.query<Row>(
    `with sized as (
       select o.id, o.seq, s.payload_stored_bytes, s.headers_stored_bytes,
              case when s.payload_stored_bytes <= $2::bigint then octet_length(o.payload::text)::bigint end
                as payload_bytes,
              case when s.headers_stored_bytes <= $2::bigint then (
                select coalesce(sum(octet_length(h.key) + 6 + coalesce(octet_length(h.value), 0)), 0)
                from jsonb_each_text(o.headers) as h
              ) end as header_bytes
       from ${names.qualified} as o
       cross join lateral (
         select pg_column_size(o.payload) as payload_stored_bytes,
                pg_column_size(o.headers) as headers_stored_bytes
       ) as s
       where o.id = any($1::uuid[])
     ), judged as (
       select sized.*,
              coalesce(payload_bytes * 2 <= $3::bigint * 3 and header_bytes <= $3::bigint, false) as sendable
       from sized
     ), budgeted as (
       select judged.*,
              sendable and (
                sum(payload_bytes + header_bytes) filter (where sendable) over (order by seq) <= $4::bigint
                or ($5::boolean and count(*) filter (where sendable) over (order by seq) = 1)
              ) as load
       from judged
     )
     select b.id, b.payload_stored_bytes, b.headers_stored_bytes, b.payload_bytes::integer, b.header_bytes::bigint,
            b.load, case when b.load then o.payload::text end as payload, case when b.load then o.headers end as headers
     from budgeted as b
     join ${names.qualified} as o on o.id = b.id
     order by b.seq`,
    [
      ids,
      STORED_BYTES_PER_TEXT_BYTE * limits.maxMessageBytes,
      limits.maxMessageBytes,
      budgetBytes,
      loadFirst,
    ],
  );
  return rows;
}

function toLoaded(row: Row, limits: PayloadLimits): LoadedPayload {
  const limit = limits.maxMessageBytes;
  const notLoaded = "; dead-lettered without loading it";
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

function isRowDataError(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && ROW_DATA_ERROR.test(code);
}
