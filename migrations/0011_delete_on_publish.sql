-- Retention mode `delete` (OUTBOX_RETENTION, issue 33): the relay deletes the rows it published in the round's
-- own transaction instead of marking them, so publishing an event costs one small WAL record (a heap delete, no
-- new row version, no index entry) instead of a new version of the whole row with an entry in every index whose
-- predicate it matches: measured 780 B of relay WAL per event in `keep` against 120 B in `delete`, 1,784 B
-- against 928 B over an event's whole life (docs/benchmarks.md, "Retention modes"). What reads published rows keeps working from what stays:
--
-- - Redrive's "overtaken" check (operate/sql/redriveDeadLetters.ts) reads 0006's per-group high-water marks. The
--   relay writes a group's mark when it deletes an event that overtook one of the group's dead letters (a
--   dead letter of the group with a smaller seq), in the same statement: rare, so the common event pays nothing
--   for it. A group without a dead letter has nothing redrive could ask about; a dead letter made later has a
--   greater seq than every deleted event of its group, so none of them overtook it.
-- - The order-key check (0010's order_key_state) must know the greatest seq ever used even when every row is
--   gone: the relay raises {{related:deleted_on_publish}}.highest_seq once per round (one row, no indexed column
--   touched: a HOT update), and the function reads it beside the table and the marks.
-- - Published counts: the same row counts the events deleted as published (rows no longer do).
-- - Dead letters stay rows, redrivable as before; the purge deletes published rows left from `keep` and dead
--   letters past their retention, unchanged.
--
-- Least privilege for the relay's new statements, and no more: DELETE on the outbox, limited by row security to
-- rows neither published nor dead-lettered (the relay can already hide a pending row by marking it published;
-- it must not be able to delete the dead letters or the published history that `keep` exists to retain);
-- INSERT and UPDATE of the mark on the high-water table (0009's trigger still keeps the greater mark); UPDATE of
-- the counters row.
--
-- In place and reversible at any time: catalog changes, one new one-row table, no rewrite, no index. A relay
-- in either mode works on this schema, so switching is a redeploy of the setting; relays of both modes running
-- at once during the deploy share the claim's locks as before. ACCESS EXCLUSIVE first and at its final strength
-- (CREATE POLICY needs it; CONTRIBUTING.md), held for milliseconds.

lock table {{table}} in access exclusive mode;

create table {{related:deleted_on_publish}} (
  only_row boolean primary key default true check (only_row),
  -- Events the relay published and deleted (retention `delete`): the published count rows no longer carry.
  events bigint not null default 0,
  -- The greatest seq the relay deleted as published: the order-key check's memory once the rows are gone.
  highest_seq bigint
);

insert into {{related:deleted_on_publish}} (only_row) values (true);

comment on table {{related:deleted_on_publish}} is
  'What the relay deleted as published in retention mode delete (migration 0011): a count and the highest seq.';

do $migration$
declare
  relay_role text := (select r.role_name from {{related:roles}} as r where r.job = 'relay');
begin
  execute format('grant delete on {{table}} to %I', relay_role);
  execute format(
    'create policy relay_deletes_pending_rows on {{table}} as restrictive for delete to %I '
    'using (processed_at is null and dead_lettered_at is null)', relay_role);
  execute format('grant insert on {{related:group_high_water}} to %I', relay_role);
  execute format('grant update (purged_published_seq) on {{related:group_high_water}} to %I', relay_role);
  execute format('grant select on {{related:deleted_on_publish}} to %I', relay_role);
  execute format('grant update (events, highest_seq) on {{related:deleted_on_publish}} to %I', relay_role);
  execute format('grant select on {{related:deleted_on_publish}} to %I',
                 (select r.role_name from {{related:roles}} as r where r.job = 'purge'));

  -- 0010's function with the counters row's highest seq in the greatest(); same result columns, so CREATE OR
  -- REPLACE keeps its grants and there is no moment without it.
  execute format(
    $function$
      create or replace function {{related:order_key_state}}()
      returns table (sequence_name text, next_seq bigint, sequence_increment bigint, sequence_cache bigint,
                     highest_seq bigint)
      language sql stable set search_path = pg_catalog, pg_temp as $body$
        select %1$L::text,
               case when s.is_called then s.last_value + p.seqincrement else s.last_value end,
               p.seqincrement, p.seqcache,
               greatest((select o.seq from {{table}} as o order by o.seq desc limit 1),
                        (select h.purged_published_seq from {{related:group_high_water}} as h
                         order by h.purged_published_seq desc limit 1),
                        (select d.highest_seq from {{related:deleted_on_publish}} as d))
        from %1$s as s, pg_sequence as p
        where p.seqrelid = %1$L::regclass
      $body$
    $function$,
    pg_get_serial_sequence('{{table}}', 'seq'));
end;
$migration$;
