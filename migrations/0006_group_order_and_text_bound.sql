-- Two changes to the insert trigger of 0005, one lock of the table.
--
-- 1. One ordering unit: the message group. The relay publishes with MessageGroupId = aggregate_id, so two
--    aggregate types that share an id (Order/42, Shipment/42) share one FIFO group. 0005 keyed the commit-order
--    lock by (aggregate_type, aggregate_id), which let two such writers commit in the other order of their seqs,
--    and the claim ordered per (type, id) too (0007 gives it the group's indexes). Now the lock is keyed by the
--    group alone, exactly what the destination groups by.
-- 2. Bounded server-side work per row. jsonb prints numbers in full: `[1e131000, ... x 7000]` is stored in
--    1.9 KB (numeric keeps one digit group and a weight; pglz compresses the rest) and prints as 917 MB. The
--    print ignores statement_timeout and pg_cancel_backend (measured: 17 s into a 2 s timeout), so a relay that
--    printed such a row kept a backend busy, holding the claim's row locks, long after it gave up. The trigger
--    now bounds the row's printed size WITHOUT printing it ({{related:text_bound}}), prints it only when that
--    bound is at most 64 MiB (~1.2 s), and refuses a row whose text cannot be a message: over 1.5 MiB, which is
--    the jsonb text of more than SQS's 1 MiB maximum (jsonb's text adds a space after each `,` and `:`). What
--    it found is kept in `text_bytes_bound`, so the relay knows the row prints within it; rows inserted around
--    the trigger (before this migration, or with triggers disabled) have null there and the relay bounds them
--    itself before printing anything (functions/shared/sql/loadPayloads.ts).
--
-- Its cost: one jsonpath walk over the row's numbers per insert, no printing (`npm run bench -- enqueue`, 16
-- writers, with and without it: issue 21's closing note).
--
-- In place, no table rewrite: a nullable column without a default is a catalog change. One lock, taken first and
-- at its final strength: ACCESS EXCLUSIVE, so every open transaction that inserted under the old (type, id) key
-- has ended before the new key is in force, and no writer of one group can hold the old key while another takes
-- the new one. Not a weaker lock first and ADD COLUMN's later: a relay round holds ROW SHARE from its claim (FOR
-- UPDATE) and asks for ROW EXCLUSIVE when it records the outcomes, so a migration holding SHARE ROW EXCLUSIVE
-- while it waits for ACCESS EXCLUSIVE deadlocks with every round in flight (reproduced by test/upgrade.test.ts;
-- test/migrate.lockUpgrade.test.ts holds every migration to it). Writers and relays queue behind it for as long
-- as it waits; the runner's lock_timeout (1 s) bounds that and retries (functions/shared/migrate.ts). Measured on
-- a 1M-row table: 33 ms in all (docs/operations.md, "Upgrading to 0006 and 0007").

lock table {{table}} in access exclusive mode;

alter table {{table}} add column text_bytes_bound integer;

comment on column {{table}}.text_bytes_bound is
  'Upper bound on the JSON text bytes of payload plus headers, found by the insert trigger; null: inserted '
  'without the trigger, bounded by the relay before it prints the row.';

-- Per message group, the highest seq the purge deleted as published: what redrive must compare a dead letter
-- with once the published successors themselves are gone (the purge deletes them after a week, dead letters are
-- kept). Written by the purge, in the statement that deletes (sql/purgePublished.ts), so it costs the relay
-- nothing; read by redrive (sql/redriveDeadLetters.ts). One row per group that ever had a row purged; never
-- purged itself (a group's mark must outlive its rows).
create table {{related:group_high_water}} (
  aggregate_id text primary key,
  purged_published_seq bigint not null
);

-- An upper bound on jsonb's text form, computed without producing it. Every byte of jsonb prints as at most
-- 6 bytes, except numbers: a string byte at most `\u0001`; keys, true/false/null and containers are at least
-- their text in JEntries and headers. A number prints its integer digits, its display scale and `-`, `.`, `, `:
-- below 1e16 that is at most 16 + scale + 4 characters, within 6 times its 8 or more bytes of storage except
-- for the scale; above it, 300 digits or, beyond 1e300, numeric's maximum of 131,072 are counted in full. The
-- raw (uncompressed) size is read from the datum when it is not compressed (in the insert trigger it never
-- is), else from a copy, which decompresses (~GB/s) but prints nothing. Measured on `[1e131000 x 7000]`:
-- 0.2 s to bound it at 917,532,000 bytes (its exact text is 917,518,999), against 17 s to print it.
create function {{related:text_bound}}(value jsonb) returns bigint
language sql immutable parallel safe as $$
  select 6 * case when pg_catalog.pg_column_compression(value) is null then pg_catalog.pg_column_size(value)::bigint
                  else pg_catalog.pg_column_size(pg_catalog.jsonb_build_array(value))::bigint end
         + coalesce((
             select sum(case when abs(n::numeric) < 1e16 then 16 when abs(n::numeric) < 1e300 then 300 else 131072 end
                        + pg_catalog.scale(n::numeric) + 4)
             from pg_catalog.jsonb_path_query(value, 'strict $.** ? (@.type() == "number")') as n
           ), 0)
$$;

-- The commit-order lock key of a message group (aggregate_id). Seeded by the table name, as 0005's was, so two
-- outbox tables in one database do not share keys.
create function {{related:group_lock_key}}(aggregate_id text) returns bigint
language sql immutable parallel safe as $$
  select pg_catalog.hashtextextended(aggregate_id, pg_catalog.hashtextextended('{{table}} group', 0))
$$;

-- Same signature as in 0005, so a write API one version behind keeps calling it; the locks are now per group.
create or replace function {{related:lock_aggregates}}(aggregate_types text[], aggregate_ids text[]) returns boolean
language plpgsql as $$
declare
  key bigint;
begin
  for key in
    select distinct {{related:group_lock_key}}(a.aggregate_id)
    from unnest(aggregate_ids) as a(aggregate_id)
    order by 1
  loop
    perform pg_advisory_xact_lock(key);
  end loop;
  return true;
end;
$$;

-- The trigger function of 0005 (same name, same trigger), now locking the group and bounding the row's text
-- (`%%s` is format()'s escape for the `%s` of the messages: the body is itself a format() template).
-- On UPDATE (fired only when payload or headers are set: an operator's fix-up) it re-bounds the row, so the
-- relay never trusts a bound of a value that is no longer there; it does not touch seq or the lock then.
do $migration$
begin
  execute format(
    $function$
      create or replace function {{related:commit_order}}() returns trigger
      language plpgsql security definer set search_path = pg_catalog, pg_temp as $body$
      declare
        max_text constant bigint := 1572864;
        print_cap constant bigint := 67108864;
        payload_bytes bigint;
        header_bytes bigint;
      begin
        -- Small and uncompressed (most events): printing is bounded already (6,370 bytes x 10,534 text bytes per
        -- stored byte at most, functions/shared/sql/loadPayloads.ts, is under print_cap) and cheaper than the
        -- bound: measured 4 us against 39 us per row on the loaded 2-core machine. Larger: bound first.
        if pg_column_compression(new.payload) is null and pg_column_size(new.payload) <= 6370 then
          payload_bytes := octet_length(new.payload::text);
        else
          payload_bytes := {{related:text_bound}}(new.payload);
          if payload_bytes > max_text and payload_bytes <= print_cap then
            payload_bytes := octet_length(new.payload::text);
          end if;
        end if;
        if payload_bytes > max_text then
          raise exception using errcode = 'check_violation',
            message = format('outbox payload: its JSON text %%s %%s bytes, over %%s (the text of the 1 MiB SQS maximum)',
                             case when payload_bytes > print_cap then 'could be up to' else 'is' end,
                             payload_bytes, max_text),
            hint = 'numbers are printed in full: send very large or very precise numbers as strings';
        end if;
        if pg_column_compression(new.headers) is null and pg_column_size(new.headers) <= 6370 then
          header_bytes := octet_length(new.headers::text);
        else
          header_bytes := {{related:text_bound}}(new.headers);
          if header_bytes > max_text and header_bytes <= print_cap then
            header_bytes := octet_length(new.headers::text);
          end if;
        end if;
        if header_bytes > max_text then
          raise exception using errcode = 'check_violation',
            message = format('outbox headers: their JSON text %%s %%s bytes, over %%s',
                             case when header_bytes > print_cap then 'could be up to' else 'is' end,
                             header_bytes, max_text);
        end if;
        new.text_bytes_bound := payload_bytes + header_bytes;
        if tg_op = 'INSERT' then
          if new.processed_at is null and new.dead_lettered_at is null then
            perform pg_advisory_xact_lock({{related:group_lock_key}}(new.aggregate_id));
          end if;
          new.seq := nextval(%L::regclass);
        end if;
        return new;
      end;
      $body$
    $function$,
    pg_get_serial_sequence('{{table}}', 'seq'));
end;
$migration$;

-- The order key must never run backwards: a sequence restarted lower or setval'd below what was published
-- (a restore into a fresh sequence, an RDS Blue/Green switchover whose green sequence lagged: logical
-- replication does not carry sequence values), or a sequence with CACHE > 1 (each session hands out its own
-- cached range, so a later commit of a group can draw a smaller seq) would let events overtake each other
-- unnoticed: consumers that drop "older" seqs lose them. The relay asks this once per invocation
-- (functions/shared/orderKey.ts) and refuses to relay, naming the fix, when the sequence is below the seq of
-- the most recently published row or caches more than 1. One descent of the processed_at index.
-- SECURITY DEFINER: reading a sequence's state needs a privilege on it the relay's role does not have.
do $migration$
begin
  execute format(
    $function$
      create function {{related:order_key_state}}()
      returns table (sequence_name text, sequence_last_value bigint, sequence_cache bigint, latest_published_seq bigint)
      language sql stable security definer set search_path = pg_catalog, pg_temp as $body$
        select %1$L::text, pg_sequence_last_value(%1$L::regclass),
               (select seqcache from pg_sequence where seqrelid = %1$L::regclass),
               (select seq from {{table}} where processed_at is not null order by processed_at desc limit 1)
      $body$
    $function$,
    pg_get_serial_sequence('{{table}}', 'seq'));
end;
$migration$;

create trigger {{name:text_bound}}
  before update of payload, headers on {{table}}
  for each row execute function {{related:commit_order}}();

-- ALWAYS: the triggers fire under session_replication_role = replica too (DMS, logical replication apply,
-- tools that set it to skip triggers), so such inserts still take the group lock, get their seq from the
-- sequence and are bounded. Only a trigger disabled outright (pg_restore --disable-triggers) is skipped; see
-- docs/operations.md, "Restores and Blue/Green switchovers".
alter table {{table}} enable always trigger {{name:commit_order}};
alter table {{table}} enable always trigger {{name:text_bound}};
