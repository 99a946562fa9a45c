-- Roles of this database (issue 39, finding 6). Roles belong to the cluster; a database's objects only name them.
-- `create database b template a` (or a restore of a's dump under another name in the same cluster) copies a's
-- outbox with its grants and policies, which name a's relay and purge roles: a's relay login read b's payloads
-- and marked b's pending events published. The roles table now records which database the roles were made for,
-- and the migration runner (functions/shared/db/rolesHere.ts), on every run, gives a database whose roles were
-- made for another one roles of its own: new ones, every grant, policy and ownership moved to them, the old
-- ones' rights here revoked. The relay and the purge refuse to work until it has.
--
-- The identity is the database's OID (pg_database.oid), not its name: a clone always gets a new OID (CREATE
-- DATABASE assigns one), a rename keeps it, and a name can be reused (rename a to a_old, clone a_old as a: the
-- clone has a's name and a_old's roles). pg_upgrade keeps database OIDs since PostgreSQL 15 (release notes,
-- "preserve ... database OIDs"), and a snapshot restore, an Aurora clone or a Blue/Green green copy the files
-- as they are. A logical dump restored into a new database gets a new OID; the runner then keeps the roles when
-- no other database of the cluster uses them (the restore replaced the original), and renews them otherwise.
--
-- Filled here for the database that made the roles: 0009 named them after current_database(), so roles whose
-- name is the one 0009 would give them here were made here. A clone made before this migration (its roles
-- carry its template's name) is left NULL, which the runner treats as "made for another database".
--
-- The relay and the purge read the table (their start-up check) and nothing else in it changes for them.
-- previous_role_name keeps the role a renewal replaced, so the deploy's createLogins can grant the new role to
-- a login of this outbox that was a member of the old one (functions/shared/db/logins.ts).

alter table {{related:roles}} add column database_oid oid;
alter table {{related:roles}} add column previous_role_name text;

comment on column {{related:roles}}.database_oid is
  'pg_database.oid of the database the role was made for (migration 0018); another: run outbox migrate.';
comment on column {{related:roles}}.previous_role_name is
  'The role this one replaced when the migration runner gave a cloned database roles of its own (0018).';

do $migration$
declare
  outbox text := pg_catalog.current_database() || '.' || (
    select n.nspname || '.' || c.relname from pg_catalog.pg_class as c
    join pg_catalog.pg_namespace as n on n.oid = c.relnamespace where c.oid = '{{table}}'::regclass);
  job_role record;
begin
  for job_role in select r.job, r.role_name from {{related:roles}} as r loop
    if job_role.role_name in ('outbox_' || job_role.job || ':' || outbox,
                              'outbox_' || job_role.job || ':' || pg_catalog.md5(outbox)) then
      update {{related:roles}} as r
        set database_oid = (select d.oid from pg_catalog.pg_database as d
                            where d.datname = pg_catalog.current_database())
        where r.job = job_role.job;
    end if;
    execute format('grant select on {{related:roles}} to %I', job_role.role_name);
  end loop;
end;
$migration$;
