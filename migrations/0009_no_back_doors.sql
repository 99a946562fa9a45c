-- No back doors in the database (issue 28, DESIGN.md invariant 10). Three changes, one lock of the table.
--
-- 1. The definer code. outbox_commit_order() (0005, 0006) runs as the migration owner because nextval() checks a
--    privilege on the sequence that producers do not hold. It kept Postgres's default EXECUTE for PUBLIC, so a role
--    with INSERT on the outbox and a schema of its own could attach it to a table of its own whose `payload` is a
--    composite type with a cast to text of its own: the trigger's `new.payload::text` ran that cast as the owner
--    (a pinned search_path does not help: casts are found by type), which read what the role may not, marked
--    other producers' events published and granted the role ALL on the outbox (test/db/definerSecurity.test.ts).
--    Now nobody but its owner may EXECUTE it: Postgres checks a trigger function's EXECUTE privilege when a
--    trigger is created, never when it fires, so producers' inserts are unaffected (the same test shows it). And
--    it refuses to run for any table but its own before it reads a column, in case EXECUTE is ever granted.
--    outbox_order_key_state() (0006) was SECURITY DEFINER to read the sequence's state: it is now an ordinary
--    function, and the relay's role holds SELECT on the sequence, which reads the state and cannot change it.
-- 2. Roles per outbox. 0008's outbox_relay and outbox_purge belonged to the cluster: with two outboxes (two
--    databases, schemas or tables), one service's relay read another's payloads and marked its events sent. Each
--    outbox now has its own two NOLOGIN roles, named after the database, schema and table they serve
--    (`outbox_relay:<database>.<schema>.<table>`, `outbox_purge:...`; past 63 bytes an md5 of that text stands for
--    it) and recorded in {{related:roles}}, which is where operators and tools read them (the name is fixed when
--    created: a database created from a template keeps its template's roles). An existing installation is
--    upgraded in place: every member of outbox_relay / outbox_purge (the Lambdas' logins) becomes a member of the
--    new role, and the old roles lose their privileges on this outbox. The old roles are not dropped: another
--    outbox in the cluster may still be at 0008 and use them (docs/operations.md, "Upgrading to 0009").
-- 3. The purge deletes only published or dead-lettered rows, and never lowers a high-water mark.
--    - Row-level security on the outbox: one permissive policy lets every role do what its privileges allow (the
--      owner, who runs the migrations, the CLI and the dead-letter view, bypasses row security anyway), and two
--      restrictive ones for the purge's role alone: it may delete, and lock for update, settled rows only. A
--      pending row is invisible to its DELETE, so such a statement deletes nothing. A constant-true policy
--      leaves no trace in any other role's plans (the planner drops the qual); the purge's DELETE checks one
--      more condition per row: measured in docs/benchmarks.md ("The purge under row-level security").
--    - The high-water table (0006): the purge may update the mark's column only, and a trigger keeps the
--      greater of the old and the new mark on every UPDATE (an upsert's DO UPDATE included), whoever writes it.
--      The purge's statement already only raises marks, so it keeps working unchanged, one version behind too.
--
-- Upgrading in place: catalog changes only, no rewrite, no index. ACCESS EXCLUSIVE first and at its final
-- strength (CONTRIBUTING.md: ENABLE ROW LEVEL SECURITY needs it, and the triggers and grants come after).

lock table {{table}} in access exclusive mode;

-- 1. The trigger function of 0006, unchanged but for its first statement.
do $migration$
begin
  execute format(
    $function$
      create or replace function {{related:commit_order}}() returns trigger
      language plpgsql security definer set search_path = pg_catalog, pg_temp as $body$
      declare
        max_text constant bigint := 1572864;
        print_cap constant bigint := 67108864;
        payload_bytes bigint;
        header_bytes bigint;
      begin
        -- Before anything reads NEW: on any other table its columns may be of types whose casts and operators
        -- are someone else's code, which would run with this function's owner's rights.
        if tg_relid is distinct from '{{table}}'::regclass then
          raise exception using errcode = 'insufficient_privilege',
            message = format('%%s() runs only as the trigger of %%s, not of %%s',
                             '{{related:commit_order}}', '{{table}}', tg_relid::regclass);
        end if;
        -- Small and uncompressed (most events): printing is bounded already (6,370 bytes x 10,534 text bytes per
        -- stored byte at most, functions/shared/sql/loadPayloads.ts, is under print_cap) and cheaper than the
        -- bound: measured 4 us against 39 us per row on the loaded 2-core machine. Larger: bound first.
        if pg_column_compression(new.payload) is null and pg_column_size(new.payload) <= 6370 then
          payload_bytes := octet_length(new.payload::text);
        else
          payload_bytes := {{related:text_bound}}(new.payload);
          if payload_bytes > max_text and payload_bytes <= print_cap then
            payload_bytes := octet_length(new.payload::text);
          end if;
        end if;
        if payload_bytes > max_text then
          raise exception using errcode = 'check_violation',
            message = format('outbox payload: its JSON text %%s %%s bytes, over %%s (the text of the 1 MiB SQS maximum)',
                             case when payload_bytes > print_cap then 'could be up to' else 'is' end,
                             payload_bytes, max_text),
            hint = 'numbers are printed in full: send very large or very precise numbers as strings';
        end if;
        if pg_column_compression(new.headers) is null and pg_column_size(new.headers) <= 6370 then
          header_bytes := octet_length(new.headers::text);
        else
          header_bytes := {{related:text_bound}}(new.headers);
          if header_bytes > max_text and header_bytes <= print_cap then
            header_bytes := octet_length(new.headers::text);
          end if;
        end if;
        if header_bytes > max_text then
          raise exception using errcode = 'check_violation',
            message = format('outbox headers: their JSON text %%s %%s bytes, over %%s',
                             case when header_bytes > print_cap then 'could be up to' else 'is' end,
                             header_bytes, max_text);
        end if;
        new.text_bytes_bound := payload_bytes + header_bytes;
        if tg_op = 'INSERT' then
          if new.processed_at is null and new.dead_lettered_at is null then
            perform pg_advisory_xact_lock({{related:group_lock_key}}(new.aggregate_id));
          end if;
          new.seq := nextval(%L::regclass);
        end if;
        return new;
      end;
      $body$
    $function$,
    pg_get_serial_sequence('{{table}}', 'seq'));
end;
$migration$;

revoke execute on function {{related:commit_order}}() from public;

-- The order key's state (0006), now with the caller's rights: the relay's role reads the sequence (granted below)
-- and the outbox; a role that may read neither gets "permission denied", not the state.
do $migration$
begin
  execute format(
    $function$
      create or replace function {{related:order_key_state}}()
      returns table (sequence_name text, sequence_last_value bigint, sequence_cache bigint, latest_published_seq bigint)
      language sql stable security invoker set search_path = pg_catalog, pg_temp as $body$
        select %1$L::text, pg_sequence_last_value(%1$L::regclass),
               (select seqcache from pg_sequence where seqrelid = %1$L::regclass),
               (select seq from {{table}} where processed_at is not null order by processed_at desc limit 1)
      $body$
    $function$,
    pg_get_serial_sequence('{{table}}', 'seq'));
end;
$migration$;

-- 3b. A high-water mark only rises. Invoker's rights: it changes NEW and reads nothing.
create function {{related:high_water_only_rises}}() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
begin
  new.purged_published_seq := greatest(old.purged_published_seq, new.purged_published_seq);
  return new;
end;
$$;

revoke execute on function {{related:high_water_only_rises}}() from public;

create trigger {{name:high_water_only_rises}}
  before update on {{related:group_high_water}}
  for each row execute function {{related:high_water_only_rises}}();

alter table {{related:group_high_water}} enable always trigger {{name:high_water_only_rises}};

-- 2. The outbox's own roles, one row per job.
create table {{related:roles}} (
  job text primary key check (job in ('relay', 'purge')),
  role_name text not null unique
);

comment on table {{related:roles}} is
  'The NOLOGIN roles of this outbox (migration 0009): give each Lambda''s login membership of its job''s role.';

do $roles$
declare
  outbox text := current_database() || '.' || (
    select n.nspname || '.' || c.relname from pg_catalog.pg_class c
    join pg_catalog.pg_namespace n on n.oid = c.relnamespace where c.oid = '{{table}}'::regclass);
  job text;
  role_name text;
  relay_role text;
  purge_role text;
  member text;
begin
  foreach job in array array['relay', 'purge'] loop
    role_name := 'outbox_' || job || ':' || outbox;
    if octet_length(role_name) > 63 then
      role_name := 'outbox_' || job || ':' || md5(outbox);
    end if;
    if not exists (select from pg_catalog.pg_roles where rolname = role_name) then
      execute format('create role %I nologin', role_name);
    end if;
    insert into {{related:roles}} (job, role_name) values (job, role_name);
    -- 0008's logins keep working: each member of the cluster-wide role joins this outbox's role.
    for member in
      select m.rolname from pg_catalog.pg_auth_members a
      join pg_catalog.pg_roles r on r.oid = a.roleid
      join pg_catalog.pg_roles m on m.oid = a.member
      where r.rolname = 'outbox_' || job
    loop
      execute format('grant %I to %I', role_name, member);
    end loop;
    -- ... and the cluster-wide role loses its privileges on this outbox.
    if exists (select from pg_catalog.pg_roles where rolname = 'outbox_' || job) then
      execute format('revoke all on {{table}} from %I', 'outbox_' || job);
      execute format('revoke all on {{related:group_high_water}} from %I', 'outbox_' || job);
      execute format('revoke usage on schema {{schema}} from %I', 'outbox_' || job);
    end if;
    if job = 'relay' then relay_role := role_name; else purge_role := role_name; end if;
  end loop;

  -- What each statement needs (0008 has the reasoning; functions/shared/{relay,purge,observe}/sql/):
  -- the relay claims, loads and records, and reads the order key's sequence (functions/shared/relay/orderKey.ts);
  -- the purge measures, deletes settled rows (row security below) and raises the high-water marks.
  execute format('grant usage on schema {{schema}} to %I, %I', relay_role, purge_role);
  execute format('grant select on {{table}} to %I', relay_role);
  execute format(
    'grant update (processed_at, attempts, transient_failures, last_error, available_at, dead_lettered_at) '
    'on {{table}} to %I', relay_role);
  execute format('grant select on sequence %s to %I', pg_catalog.pg_get_serial_sequence('{{table}}', 'seq'),
                 relay_role);
  execute format('grant select, delete on {{table}} to %I', purge_role);
  execute format('grant update (last_error) on {{table}} to %I', purge_role);
  execute format('grant select, insert on {{related:group_high_water}} to %I', purge_role);
  execute format('grant update (purged_published_seq) on {{related:group_high_water}} to %I', purge_role);

  -- 3a. Row-level security. Policy names belong to their table, so they need no outbox prefix.
  execute 'alter table {{table}} enable row level security';
  execute 'create policy any_role on {{table}} as permissive for all to public using (true) with check (true)';
  execute format(
    'create policy purge_deletes_settled_rows on {{table}} as restrictive for delete to %I '
    'using (processed_at is not null or dead_lettered_at is not null)', purge_role);
  execute format(
    'create policy purge_locks_settled_rows on {{table}} as restrictive for update to %I '
    'using (processed_at is not null or dead_lettered_at is not null)', purge_role);
end;
$roles$;
