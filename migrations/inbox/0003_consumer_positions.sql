-- The key built by 0002 becomes the primary key (no scan: the index exists and both columns are not null).
-- A consumer one version behind (`on conflict (outbox_id)`) fails its records until it is replaced: loud, and
-- SQS redelivers them to the new version; nothing is lost.
-- The old key's name is looked up, not derived: Postgres named it after the table (<table>_pkey), which the
-- {{name:...}} placeholder does not spell for every table name (a table ending in _events loses that suffix).
do $$
declare
  old_key name;
begin
  select conname into strict old_key
  from pg_constraint
  where conrelid = '{{table}}'::regclass and contype = 'p';
  execute format(
    'alter table %s drop constraint %I, add constraint %I primary key using index %s',
    '{{table}}'::regclass, old_key, old_key, '{{name:consumer_outbox_id}}'
  );
end
$$;

-- The high-water mark for `staleEvents: "skip"`: per consumer and aggregate, the highest outbox `seq` applied.
-- A table of its own, so that purgeInbox (which deletes old inbox rows) never forgets it: an event older than
-- the mark is stale however long after it arrives. One row per aggregate the consumer has seen.
create table {{related:positions}} (
  consumer text not null,
  aggregate_type text not null,
  aggregate_id text not null,
  seq bigint not null,
  updated_at timestamptz not null default now(),
  primary key (consumer, aggregate_type, aggregate_id)
);
