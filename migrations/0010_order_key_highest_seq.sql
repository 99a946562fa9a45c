-- migrate: no-transaction
-- The order-key check compares the sequence's NEXT value with the greatest seq ever used (issue 28, finding 2).
--
-- 0006's outbox_order_key_state() compared the sequence's last value with the seq of the most recently
-- published row (by processed_at) only, which missed every way the sequence can sit below a seq already used:
-- - pending rows above it (a backlog restored or moved into a fresh sequence): a new event of a group drew a
--   smaller seq than the group's waiting ones and was delivered first, or the same seq as one of them;
-- - every published row purged: only the purge's high-water marks (0006) remember seq 1002;
-- - a delayed row published last: the latest by processed_at is not the highest seq;
-- and it refused a forward `alter sequence ... restart with N`, whose last_value reads null (is_called = false)
-- although the next seq is N.
-- Now: next = last_value when is_called is false, else last_value + increment; highest = the greatest of the
-- table's seqs (pending, published, dead) and the high-water marks of purged rows (0006's table; nothing else
-- keeps a seq: redrive reads those marks, it writes none). The relay refuses unless next > highest.
--
-- Asked by every relay invocation and again on the first round after its pool follows a moved secret, so each
-- part is one index descent: an index on seq (0003 dropped the last one that could answer max(seq); the claim's
-- indexes are per group and partial) and one on the high-water marks (one row per purged group). Measured on a
-- 1M-row table with 100,000 marks: two index-only scans, 8 buffers, 0.07 ms (docs/operations.md, "The order
-- key"). The seq index costs each insert one more index entry, always on the rightmost leaf page (seq grows).
--
-- Built CONCURRENTLY (SHARE UPDATE EXCLUSIVE: producers and relays go on), hence no transaction, as 0007. The
-- function is swapped in one DO block, a single statement: the old one is dropped (its result columns change,
-- which CREATE OR REPLACE cannot do) and the new one created in the same transaction, so there is no moment
-- without it. It runs with the caller's rights, as 0009 left it (no definer code where plain privileges do the
-- job): this outbox's relay role (0009, {{related:roles}}) gets EXECUTE and SELECT on the high-water marks it
-- now reads (it already reads the table and the sequence); PUBLIC gets nothing. The owner (the migration user,
-- which the CLI runs as) keeps EXECUTE. A relay one version behind reads the
-- old columns and fails its invocations (no event moves) until the deploy replaces it: deploy the relay with
-- this migration.

create index concurrently if not exists {{name:seq}} on {{table}} (seq);

create index concurrently if not exists {{name:group_high_water_seq}}
  on {{related:group_high_water}} (purged_published_seq);

do $migration$
begin
  drop function if exists {{related:order_key_state}}();
  execute format(
    $function$
      create function {{related:order_key_state}}()
      returns table (sequence_name text, next_seq bigint, sequence_increment bigint, sequence_cache bigint,
                     highest_seq bigint)
      language sql stable set search_path = pg_catalog, pg_temp as $body$
        select %1$L::text,
               case when s.is_called then s.last_value + p.seqincrement else s.last_value end,
               p.seqincrement, p.seqcache,
               greatest((select o.seq from {{table}} as o order by o.seq desc limit 1),
                        (select h.purged_published_seq from {{related:group_high_water}} as h
                         order by h.purged_published_seq desc limit 1))
        from %1$s as s, pg_sequence as p
        where p.seqrelid = %1$L::regclass
      $body$
    $function$,
    pg_get_serial_sequence('{{table}}', 'seq'));
  revoke execute on function {{related:order_key_state}}() from public;
  execute format('grant execute on function {{related:order_key_state}}() to %I',
                 (select r.role_name from {{related:roles}} as r where r.job = 'relay'));
  execute format('grant select on {{related:group_high_water}} to %I',
                 (select r.role_name from {{related:roles}} as r where r.job = 'relay'));
end;
$migration$;
