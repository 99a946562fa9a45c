-- Optional LISTEN/NOTIFY wake-up for the relay, installed DISABLED.
--
-- Off by default because NOTIFY takes a cluster-wide lock at commit: with the trigger enabled every
-- transaction that inserts outbox rows serializes on that lock, which has caused real outages under high
-- write concurrency. Statement-level, so a multi-row enqueue notifies once, and Postgres folds identical
-- notifications of one transaction into one. Enable with:
--   alter table <schema>.<table> enable trigger <prefix>_notify;
-- and run the relay with RELAY_LISTEN=true (note: LISTEN pins an RDS Proxy session for its lifetime).
-- The channel is the table's name.

create function {{related:notify}}() returns trigger
language plpgsql as $$
begin
  perform pg_notify(tg_table_name, '');
  return null;
end;
$$;

create trigger {{name:notify}}
  after insert on {{table}}
  for each statement execute function {{related:notify}}();

alter table {{table}} disable trigger {{name:notify}};
