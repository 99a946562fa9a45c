-- Least privilege inside the database: a role for the relay and one for the purge, each with exactly what its
-- statements need on this outbox, so neither has to run as the cluster's master user. The roles are NOLOGIN
-- groups: give each Lambda a login of its own that is a member (docs/deploy.md, "Database roles"), with its own
-- secret (database.relaySecret, database.purgeSecret); the migrations keep the admin secret, since they own the
-- objects and run DDL.
--
-- Roles belong to the cluster, not to a database, so a second outbox (another table, another database) shares
-- them and this file only adds its grants. The role is created when missing; two migrations racing to create
-- it (two databases migrated at once) meet a unique violation, which the second one ignores. Creating a role
-- needs CREATEROLE: the RDS/Aurora master user has it (rds_superuser); another migration user needs it too.
--
-- What each statement needs (functions/shared/sql/):
-- - relay: claimBatch reads the pending rows and locks them FOR UPDATE SKIP LOCKED, which needs UPDATE on at
--   least one column besides SELECT; loadPayloads reads; recordOutcomes updates the six columns below and
--   nothing else (never payload, headers, seq or the aggregate). LISTEN needs no privilege.
-- - purge: outboxSnapshot reads; purgePublished deletes old rows, choosing them FOR UPDATE SKIP LOCKED, which
--   needs an UPDATE privilege too (test/roles.test.ts fails without it). On last_error alone: a column the purge
--   never writes, and the one whose change does the least harm (a diagnostic text; processed_at or
--   dead_lettered_at would let the role hide a pending event from the relay).
-- Neither may insert (that is the producers', docs/deploy.md#producers), redrive or read the dead-letter view
-- (the CLI's, run as an operator).

do $roles$
begin
  if not exists (select from pg_catalog.pg_roles where rolname = 'outbox_relay') then
    begin
      create role outbox_relay nologin;
    exception when duplicate_object or unique_violation then null;
    end;
  end if;
  if not exists (select from pg_catalog.pg_roles where rolname = 'outbox_purge') then
    begin
      create role outbox_purge nologin;
    exception when duplicate_object or unique_violation then null;
    end;
  end if;
end;
$roles$;

grant usage on schema {{schema}} to outbox_relay, outbox_purge;

grant select on {{table}} to outbox_relay;
grant update (processed_at, attempts, transient_failures, last_error, available_at, dead_lettered_at)
  on {{table}} to outbox_relay;

grant select, delete on {{table}} to outbox_purge;
grant update (last_error) on {{table}} to outbox_purge;

-- The purge's DELETE records each group's highest purged published seq (0006's high-water table), which redrive
-- reads to know what a dead letter would overtake; the relay only reads the outbox and calls 0006's functions
-- (EXECUTE is PUBLIC's by default; outbox_order_key_state is SECURITY DEFINER).
grant select, insert, update on {{related:group_high_water}} to outbox_purge;
