-- The outbox table. Placeholders are replaced by quoted, validated identifiers by the migration runner:
--   {{schema}}  the schema,  {{table}}  "schema"."table",
--   {{related:x}}  "schema"."<prefix>_x",  {{name:x}}  "<prefix>_x" (for indexes, which take no schema).

create schema if not exists {{schema}};

create table {{table}} (
  -- Doubles as the SQS MessageDeduplicationId: a republish after a crash is deduplicated by SQS (5 minutes).
  id uuid primary key default gen_random_uuid(),
  -- The order key. UUIDs are unordered and created_at is the transaction's start time, shared by every row
  -- of a transaction and not monotonic across transactions, so neither can order events.
  seq bigint generated always as identity,
  aggregate_type text not null check (char_length(aggregate_type) between 1 and 256),
  -- Becomes the SQS MessageGroupId (1-128 characters). Its character set is checked by the write API, not
  -- here: a row inserted by hand with a bad id must still be insertable so the relay can dead-letter it.
  aggregate_id text not null check (char_length(aggregate_id) between 1 and 128),
  event_type text not null check (char_length(event_type) between 1 and 256),
  payload jsonb not null,
  -- String map of trace context and correlation ids, sent as SQS message attributes.
  headers jsonb not null default '{}' check (jsonb_typeof(headers) = 'object'),
  attempts integer not null default 0 check (attempts >= 0),
  last_error text,
  created_at timestamptz not null default now(),
  -- Next attempt time after a failure; also lets a producer delay an event.
  available_at timestamptz not null default now(),
  processed_at timestamptz,
  -- Set when the relay gives up. Explicit, rather than derived from attempts >= max, so that changing the
  -- max-attempts setting later neither revives nor kills rows.
  dead_lettered_at timestamptz,
  constraint {{name:published_or_dead}} check (processed_at is null or dead_lettered_at is null)
);

-- Every row is inserted, updated once when published and deleted by the purge: a queue table churns its
-- whole content. With the default scale factor (0.2) a 10M-row table collects 2M dead tuples before
-- autovacuum runs, and the claim query's index scan wades through them. Vacuum after ~1% churn instead,
-- without throttling, so the pending index stays small.
alter table {{table}} set (
  autovacuum_vacuum_scale_factor = 0.01,
  autovacuum_vacuum_threshold = 1000,
  autovacuum_vacuum_insert_scale_factor = 0.01,
  autovacuum_analyze_scale_factor = 0.02,
  autovacuum_vacuum_cost_delay = 0
);

-- Pending rows in seq order: the claim scan. Partial, so it holds only unpublished, live rows and stays
-- small however many published rows wait for the purge.
create index {{name:pending_seq}} on {{table}} (seq)
  where processed_at is null and dead_lettered_at is null;

-- "Is there an earlier unpublished event of this aggregate?": one index descent per candidate row.
-- Dead letters stay in it so strict mode can see them block their aggregate.
create index {{name:pending_aggregate}} on {{table}} (aggregate_type, aggregate_id, seq)
  where processed_at is null;

-- The purge deletes published rows oldest first.
create index {{name:processed_at}} on {{table}} (processed_at)
  where processed_at is not null;

-- Dead letters are few; this keeps counting and listing them cheap on a large table.
create index {{name:dead_lettered_at}} on {{table}} (dead_lettered_at)
  where dead_lettered_at is not null;

create view {{related:dead_letters}} as
  select id, seq, aggregate_type, aggregate_id, event_type, payload, headers, attempts, last_error,
         created_at, dead_lettered_at
  from {{table}}
  where dead_lettered_at is not null;
