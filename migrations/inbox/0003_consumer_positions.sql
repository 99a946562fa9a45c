-- The key built by 0002 becomes the primary key (no scan: the index exists and both columns are not null).
-- A consumer one version behind (`on conflict (outbox_id)`) fails its records until it is replaced: loud, and
-- SQS redelivers them to the new version; nothing is lost.
alter table {{table}}
  drop constraint {{name:pkey}},
  add constraint {{name:pkey}} primary key using index {{name:consumer_outbox_id}};

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
