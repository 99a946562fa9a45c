-- An inbox row commits only with its record's own commit (issue 39, finding 2; DESIGN.md invariant 10: what the
-- exactly-once promise rests on is enforced by the server, not by parsing the handler's SQL). The record's
-- insert (functions/shared/consumer/sql/recordInbox.ts) marks its transaction, transaction-locally, as a
-- record's; the pipeline's check just before its COMMIT (sql/sameTransaction.ts) marks it as committed by the
-- pipeline. This deferred trigger runs at COMMIT: a record's transaction committed by anything else (a COMMIT the
-- handler got past the guard, as `;commit` once did) raises, so the COMMIT fails and rolls back the inbox row
-- with the handler's writes, and the redelivery does the work once.
--
-- Rows inserted by anything but a record (a backfill, an older consumer during a deploy) carry no mark and are
-- let through. A handler that runs `set constraints all immediate` fires the check before the pipeline marked
-- the commit: the guard refuses that statement (name your own constraints instead). Invoker's rights: it reads
-- two settings and the transaction id, nothing else; search_path pinned.

create function {{related:commits_with_record}}() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
begin
  if current_setting('outbox_inbox.record', true) = pg_current_xact_id()::text
     and current_setting('outbox_inbox.commit', true) is distinct from pg_current_xact_id()::text then
    raise exception using errcode = 'invalid_transaction_termination',
      message = 'an inbox row commits only with its record''s commit: a statement of the handler committed '
                'the record''s transaction, which is rolled back; the record fails and is redelivered';
  end if;
  return null;
end;
$$;

create constraint trigger {{name:commits_with_record}} after insert on {{table}}
  deferrable initially deferred
  for each row execute function {{related:commits_with_record}}();
