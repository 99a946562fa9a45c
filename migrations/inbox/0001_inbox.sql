-- The consumer's inbox: one row per outbox event this consumer has applied. It lives in the CONSUMER's
-- database, beside the consumer's own tables, so that the row and the consumer's writes commit in one
-- transaction (functions/shared/consumer/). Applied by migrateInbox(), with its own ledger ({{related:migrations}}).
-- Placeholders as in migrations/0001_outbox_events.sql: {{schema}}, {{table}}, {{name:x}}.

create schema if not exists {{schema}};

create table {{table}} (
  -- The outbox row id (the messageAttribute outboxId). The primary key is the deduplication: a second
  -- delivery of the same event, however late, conflicts here and is skipped.
  outbox_id uuid primary key,
  -- What it was, for an operator asking "did we apply that event?"; not needed for the deduplication.
  event_type text not null,
  aggregate_type text not null,
  aggregate_id text not null,
  processed_at timestamptz not null default now()
);

-- purgeInbox deletes the oldest rows first, a bounded batch at a time.
create index {{name:processed_at}} on {{table}} (processed_at);
