-- Per-aggregate commit order, enforced by the database for every producer (the write API, plain SQL, other
-- languages), without trusting producers to serialize their writes.
--
-- The problem: `seq` came from the identity default at INSERT, but a row becomes visible at COMMIT. Transaction
-- A inserts seq 5 for order-1, transaction B inserts seq 6 for order-1 and commits first: the relay publishes 6,
-- then 5 once A commits, and a consumer that drops "older" seqs loses event 5.
--
-- The fix: a BEFORE INSERT row trigger takes a transaction-level advisory lock keyed by the row's aggregate and
-- only THEN assigns seq. A second writer of the same aggregate waits at its first outbox insert until the first
-- commits or rolls back, and then draws a larger seq. So, per aggregate, seq increases in commit order (insert
-- order within one transaction), and nothing a producer writes into seq survives: the trigger overwrites it.
-- Postgres makes a commit visible before it releases the transaction's locks, so the waiting writer's row can
-- never become visible before the row it waited for.
--
-- Why this design, and not the alternatives:
-- - Ordering by transaction id and reading only below pg_snapshot_xmin (Watermill, Emmett) follows transaction
--   START order, not commit order, and stalls the relay behind any long transaction anywhere in the cluster.
-- - A lock per category on every write (message-db) serializes unrelated aggregates; keying by aggregate only
--   serializes writers that would otherwise race.
-- - Row locks on an aggregates table (insert ... on conflict do update) would serialize too, but write a row
--   per event (measured in docs/benchmarks.md, "Enqueue with the order guarantee").
-- - Advisory locks write nothing and live in shared memory; `_xact_` ones end with the transaction and do not
--   pin an RDS Proxy session (session-level pg_advisory_lock does).
--
-- The costs:
-- - Writers of ONE aggregate wait for each other until commit: a slow transaction holds up the next event of
--   its aggregate, never other aggregates. (Writers that already lock the aggregate's row wait there anyway.)
-- - A transaction that writes several aggregates can deadlock with one writing them in the other order. Postgres
--   detects it after deadlock_timeout (1 s by default) and aborts one with SQLSTATE 40P01; that caller retries.
--   The write API avoids it for one enqueue call: it locks all the call's aggregates first, sorted by lock key
--   ({{related:lock_aggregates}}). Separate enqueue calls in one transaction, or plain SQL inserting aggregates in
--   different orders, can still meet a 40P01.
-- - A producer that locks a business row AFTER its outbox insert, racing one that locks it BEFORE, can deadlock
--   the same way: take business row locks before the first outbox insert.
-- - The identity default draws a value before the trigger draws the real one, so seq advances by 2 per row
--   (gaps were always possible: rolled-back inserts leave them). Keeping the identity column avoids an
--   ACCESS EXCLUSIVE rewrite of the column definition on a busy table.
-- - Lock keys are 64-bit hashes of (table, aggregate_type, aggregate_id): a collision of two aggregates only
--   makes their writers wait for each other, never reorders anything. The relay never takes these locks: it
--   only reads committed rows and updates them, and the trigger fires on INSERT only.
--
-- Upgrading in place: no table rewrite, no new index. CREATE TRIGGER takes a SHARE ROW EXCLUSIVE lock: it waits
-- for open transactions that wrote the table (so every insert that drew an old-style seq has committed or rolled
-- back before the trigger exists), and writers queue behind it while it waits. The migration runner's
-- lock_timeout (1 s) bounds that queue; when it fires the runner steps aside and tries again later
-- (functions/shared/migrate.ts), then fails naming the blocking transaction's trail.

-- Lock key of one aggregate of this outbox. The table name seeds the hash so two outbox tables in one database
-- do not share keys; nesting the hashes (rather than concatenating) keeps ('a-b', 'c') and ('a', 'b-c') apart.
create function {{related:aggregate_lock_key}}(aggregate_type text, aggregate_id text) returns bigint
language sql immutable parallel safe as $$
  select pg_catalog.hashtextextended(aggregate_id,
    pg_catalog.hashtextextended(aggregate_type, pg_catalog.hashtextextended('{{table}}', 0)))
$$;

-- Locks the given aggregates in one canonical order (by lock key), so two multi-aggregate transactions that
-- call it cannot deadlock on each other. Returns true so it can gate a statement (see functions/shared/enqueue.ts).
create function {{related:lock_aggregates}}(aggregate_types text[], aggregate_ids text[]) returns boolean
language plpgsql as $$
declare
  key bigint;
begin
  for key in
    select distinct {{related:aggregate_lock_key}}(a.aggregate_type, a.aggregate_id)
    from unnest(aggregate_types, aggregate_ids) as a(aggregate_type, aggregate_id)
    order by 1
  loop
    perform pg_advisory_xact_lock(key);
  end loop;
  return true;
end;
$$;

-- Rows inserted already published or dead-lettered (imports of history, backfills, test fixtures) are never
-- published as they are, so their order against concurrent writers cannot matter: they skip the lock, which
-- keeps a bulk import of many aggregates from needing one lock-table slot per aggregate (see the lock table
-- note in docs/operations.md). Every row still takes its seq here.
-- The trigger function names the identity sequence itself (resolved once per session by plpgsql's plan cache);
-- its name depends on the table's, so it is looked up here.
-- SECURITY DEFINER because nextval() checks privileges on the sequence, which the identity default never did: a
-- producer role granted only INSERT on the table must keep working. The fixed search_path keeps a caller's
-- objects from standing in for the functions it calls with the owner's rights.
do $migration$
begin
  execute format(
    $function$
      create function {{related:commit_order}}() returns trigger
      language plpgsql security definer set search_path = pg_catalog, pg_temp as $body$
      begin
        if new.processed_at is null and new.dead_lettered_at is null then
          perform pg_advisory_xact_lock({{related:aggregate_lock_key}}(new.aggregate_type, new.aggregate_id));
        end if;
        new.seq := nextval(%L::regclass);
        return new;
      end;
      $body$
    $function$,
    pg_get_serial_sequence('{{table}}', 'seq'));
end;
$migration$;

create trigger {{name:commit_order}}
  before insert on {{table}}
  for each row execute function {{related:commit_order}}();
