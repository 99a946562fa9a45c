-- migrate: no-transaction
-- Stale-event marks per origin (issue 28): a `seq` belongs to the outbox that assigned it, so the mark of
-- (consumer, aggregate) is kept per origin, the outbox the event came from (consumer/inboxEvent.ts `origin`: an
-- EventBridge event's `source`, or the ARN of the relay's queue). Before, two producers' `order/42` shared one
-- mark, and the lower-numbered producer's events were acknowledged as stale and never applied.
--
-- Existing marks get the origin '' (the column's default). No event has that origin, so they are no longer
-- consulted: their seqs may mix outboxes, and judging one origin's events against them is the loss this fixes.
-- Until an aggregate's next event sets its mark under the new key, a late event of it is applied (as
-- staleEvents "apply" would) rather than skipped. They stay for an operator to read; deleting them is safe.
--
-- No rewrite, no blocking: the column with a constant default is a catalog change; the new key's index is built
-- CONCURRENTLY, then becomes the primary key (no scan) in place of the old one, keeping the old key's name. The
-- DO block's statements share one line each: this file is split into statements at a semicolon ending a line.
-- A consumer one version behind (`on conflict (consumer, aggregate_type, aggregate_id)`) fails its stale-skip
-- records until it is replaced: loud, and SQS redelivers them to the new version; nothing is lost.

alter table {{related:positions}} add column if not exists origin text not null default '';

create unique index concurrently if not exists {{name:positions_origin_key}} on {{related:positions}} (consumer, origin, aggregate_type, aggregate_id);

-- If the key already has origin (a retry after this block ran), the index built above is a spare: dropped.
do $$ declare old_key name; has_origin boolean; begin
  select c.conname, exists (select from pg_attribute as a where a.attrelid = c.conrelid and a.attname = 'origin' and a.attnum = any(c.conkey)) into strict old_key, has_origin from pg_constraint as c where c.conrelid = '{{related:positions}}'::regclass and c.contype = 'p'; if has_origin then execute format('drop index if exists %s', '{{name:positions_origin_key}}'); else execute format('alter table %s drop constraint %I, add constraint %I primary key using index %s', '{{related:positions}}'::regclass, old_key, old_key, '{{name:positions_origin_key}}'); end if; end
$$;
