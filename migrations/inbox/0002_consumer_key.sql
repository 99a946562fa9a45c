-- migrate: no-transaction
-- Several consumers can share one database (and one inbox): the deduplication key becomes (consumer,
-- outbox_id). Rows already there belong to the consumer named "default", createInboxHandler's default, so an
-- existing single-consumer deployment keeps skipping the events it applied before the upgrade.
--
-- No table rewrite: a column with a constant default is only recorded in the catalog (Postgres 11+: "the
-- default value is ... stored in the table's metadata", https://www.postgresql.org/docs/current/sql-altertable.html#SQL-ALTERTABLE-NOTES),
-- and the new key's index is built CONCURRENTLY, without blocking the consumer's inserts. 0003 makes it the
-- primary key.

alter table {{table}} add column if not exists consumer text not null default 'default';

create unique index concurrently if not exists {{name:consumer_outbox_id}} on {{table}} (consumer, outbox_id);
