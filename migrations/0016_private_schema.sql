-- Definer code calls only what its owner owns; roles cannot stop or rewrite delivery; seqs survive replication
-- and restores (issue 39, findings 1, 3, 5, 8, 10).
--
-- 1. The private schema. Whoever owns the outbox's schema may drop any object in it, whoever owns the object
--    (PostgreSQL docs, DROP FUNCTION / DROP TABLE: the owner "or the owner of the schema"), and create another
--    under its name. On PG 15+ the database owner owns `public` (pg_database_owner), so an application role that
--    owns its database, or any schema passed to --schema, could replace {{name:group_lock_key}}(text): the
--    SECURITY DEFINER commit-order trigger called it by name on every insert, so the producer's next insert ran
--    the producer's code as the migration owner (it granted itself superuser). The same for {{name:text_bound}}
--    and for {{name:limits}} (dropped and re-created with any limit). PostgreSQL's "Writing SECURITY DEFINER
--    Functions Safely" (CREATE FUNCTION): everything such a function reaches must be in schemas no caller can
--    create in, schema-qualified, search_path pinned. So everything the trigger calls or reads, the order-key
--    check the relay calls and the marks it reads, and the roles table migrations take their grantees from,
--    move to a schema of this outbox's own ({{private}}), created here and so owned by the migration owner, with
--    CREATE for nobody else (a new schema grants PUBLIC nothing). USAGE for PUBLIC lets roles name what they may
--    use there (the write API's lock_aggregates calls the group lock key); it creates, drops or alters nothing.
--    ALTER ... SET SCHEMA moves each object with its columns, indexes, constraints, triggers, policies and
--    grants; the functions whose bodies name a moved object are re-created below, naming it in its new place.
--    `create schema` fails when a schema of that name already exists: nobody else's schema is adopted.
-- 3/5. Seqs survive logical replication and restores. Rows applied with session_replication_role = replica (a
--    logical replication subscriber's apply worker; `pg_dump --data-only` replayed the way docs/operations.md
--    says) keep the seq they had at their origin, and the sequence is raised past it, so a group's events keep
--    their order and stay above what consumers saw; the trigger renumbered them before (ENABLE ALWAYS), so
--    green's relay sent G-2@24 after G-1@44. An ordinary insert that carries a seq above the one the trigger draws
--    (COPY of a dump without replica mode: seqs from another database) is refused, naming the procedure:
--    renumbering rows in the order they arrive, which is not their order, is what made a restore reorder groups.
--    A producer's own lower seq is still replaced, as before. Only a superuser (or a role granted SET on it)
--    may set session_replication_role, so no producer can keep a seq of its choosing.
-- 8. The purge (and the relay in retention `delete`) write only marks they derive: row security on the marks
--    lets them insert or set a group's mark only to the seq of a row of that group (the rows their statement
--    deletes are still visible to it: data-modifying WITH parts share one snapshot, PostgreSQL docs, "WITH
--    Queries"). `('x', 9223372036854775807)` made the relay refuse every invocation before.
-- 10. The relay changes pending rows only: a restrictive UPDATE policy for its role, as the purge has for settled
--    rows. 0011's DELETE policy tested processed_at and dead_lettered_at, which the relay could first clear: it
--    un-marked published rows and dead letters, then deleted them. Its statements update claimed (pending) rows
--    only, so nothing it does changes.
--
-- In place: catalog changes only, no rewrite, no index build. ACCESS EXCLUSIVE first and at its final strength
-- (CONTRIBUTING.md). Deploy the relay and the purge with this migration: one version behind they call the
-- order-key check and the marks by their old names and fail (no event moves) until replaced, as after 0010.

lock table {{table}} in access exclusive mode;

create schema {{private}};
grant usage on schema {{private}} to public;

comment on schema {{private}} is
  'What the outbox''s definer trigger and its relay call or read (migration 0016): owned by the migration owner, '
  'CREATE for nobody else; docs/database.md, "Who may own what".';

alter table {{schema}}.{{name:limits}} set schema {{private}};
alter table {{schema}}.{{name:group_high_water}} set schema {{private}};
alter table {{schema}}.{{name:deleted_on_publish}} set schema {{private}};
alter table {{schema}}.{{name:roles}} set schema {{private}};
alter function {{schema}}.{{name:commit_order}}() set schema {{private}};
alter function {{schema}}.{{name:text_bound}}(jsonb) set schema {{private}};
alter function {{schema}}.{{name:group_lock_key}}(text) set schema {{private}};
alter function {{schema}}.{{name:high_water_only_rises}}() set schema {{private}};
alter function {{schema}}.{{name:check_trace_context}}() set schema {{private}};
drop function {{schema}}.{{name:order_key_state}}();

-- 0012's trigger function, naming the private schema's objects, keeping replicated and restored seqs, and
-- refusing seqs from elsewhere (`%%s` is format()'s escape for the `%s` of the messages).
do $migration$
begin
  execute format(
    $function$
      create or replace function {{related:commit_order}}() returns trigger
      language plpgsql security definer set search_path = pg_catalog, pg_temp as $body$
      declare
        -- jsonb's text of a payload whose compact JSON is max_payload_bytes: 1.5 x (a space after `,` and `:`).
        max_text constant bigint := (select l.max_payload_bytes::bigint * 3 / 2 from {{related:limits}} as l);
        max_header_text constant bigint := 1572864;
        print_cap bigint;
        payload_bytes bigint;
        header_bytes bigint;
        drawn bigint;
      begin
        -- See 0012: the print cap follows the payload limit. A string's jsonb is a few bytes more than its JSON
        -- (varlena and container headers, one JEntry per value), so a payload of strings at the limit bounds at
        -- 6 x (max_payload_bytes + those bytes): over 0012's 4 x max_text, which refused one string at exactly
        -- 64 MiB (bound 402,653,238 > 402,653,184). 64 KiB of headroom for them, x 6.
        print_cap := greatest(67108864, 4 * max_text + 6 * 65536);
        -- Before anything reads NEW: on any other table its columns may be of types whose casts and operators
        -- are someone else's code, which would run with this function's owner's rights.
        if tg_relid is distinct from '{{table}}'::regclass then
          raise exception using errcode = 'insufficient_privilege',
            message = format('%%s() runs only as the trigger of %%s, not of %%s',
                             '{{related:commit_order}}', '{{table}}', tg_relid::regclass);
        end if;
        -- Small and uncompressed (most events): printing is bounded already and cheaper than the bound (0012).
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
            message = format('outbox payload: its JSON text %%s %%s bytes, over %%s (the text of max_payload_bytes %%s in %%s)',
                             case when payload_bytes > print_cap then 'could be up to' else 'is' end,
                             payload_bytes, max_text, max_text * 2 / 3, '{{related:limits}}'),
            hint = 'numbers are printed in full: send very large or very precise numbers as strings; larger '
                   'payloads need the claim check and a raised limit (docs/large-payloads.md)';
        end if;
        if pg_column_compression(new.headers) is null and pg_column_size(new.headers) <= 6370 then
          header_bytes := octet_length(new.headers::text);
        else
          header_bytes := {{related:text_bound}}(new.headers);
          if header_bytes > max_header_text and header_bytes <= print_cap then
            header_bytes := octet_length(new.headers::text);
          end if;
        end if;
        if header_bytes > max_header_text then
          raise exception using errcode = 'check_violation',
            message = format('outbox headers: their JSON text %%s %%s bytes, over %%s',
                             case when header_bytes > print_cap then 'could be up to' else 'is' end,
                             header_bytes, max_header_text);
        end if;
        new.text_bytes_bound := payload_bytes + header_bytes;
        if tg_op = 'INSERT' then
          if current_setting('session_replication_role') = 'replica' then
            -- Applied by logical replication or replayed from a dump: the seq is the one its origin gave it, in
            -- its group's order there. Keep it, and raise the sequence past it (under a lock of its own, so two
            -- apply sessions cannot lower it), so events written here later come after it.
            perform pg_advisory_xact_lock(hashtextextended('{{table}} sequence', 0));
            if new.seq > (select case when s.is_called then s.last_value else s.last_value - 1 end from %1$s as s) then
              perform setval(%1$L::regclass, new.seq);
            end if;
          else
            if new.processed_at is null and new.dead_lettered_at is null then
              perform pg_advisory_xact_lock({{related:group_lock_key}}(new.aggregate_id));
            end if;
            drawn := nextval(%1$L::regclass);
            -- The identity default drew its value before this draw: a larger one came from elsewhere.
            if new.seq > drawn then
              raise exception using errcode = 'object_not_in_prerequisite_state',
                message = format('outbox seq %%s: this row carries a seq above the %%s its outbox would give it (a '
                                 'restore or copy from another database?); renumbering rows in the order they '
                                 'arrive would reorder their groups', new.seq, drawn),
                hint = 'replay rows with their seqs kept: PGOPTIONS=''-c session_replication_role=replica'' psql '
                       '... (docs/operations.md, "Restoring rows")';
            end if;
            new.seq := drawn;
          end if;
        end if;
        return new;
      end;
      $body$
    $function$,
    pg_get_serial_sequence('{{table}}', 'seq'));
end;
$migration$;

-- 0006's lock_aggregates (the write API's), naming the group lock key in its new place. Invoker's rights.
create or replace function {{schema}}.{{name:lock_aggregates}}(aggregate_types text[], aggregate_ids text[])
returns boolean
language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
  key bigint;
begin
  for key in
    select distinct {{related:group_lock_key}}(a.aggregate_id)
    from unnest(aggregate_ids) as a(aggregate_id)
    order by 1
  loop
    perform pg_advisory_xact_lock(key);
  end loop;
  return true;
end;
$$;

-- 0011's order-key state, in the private schema, with what a CYCLE sequence and its maximum need (finding 11):
-- the next value as numeric, so `last_value + increment` at the maximum is a number, not an overflow.
do $migration$
declare
  relay_role text := (select r.role_name from {{related:roles}} as r where r.job = 'relay');
  purge_role text := (select r.role_name from {{related:roles}} as r where r.job = 'purge');
begin
  execute format(
    $function$
      create function {{related:order_key_state}}()
      returns table (sequence_name text, next_seq numeric, sequence_increment bigint, sequence_cache bigint,
                     sequence_max bigint, sequence_cycle boolean, highest_seq bigint)
      language sql stable set search_path = pg_catalog, pg_temp as $body$
        select %1$L::text,
               case when s.is_called then s.last_value::numeric + p.seqincrement else s.last_value end,
               p.seqincrement, p.seqcache, p.seqmax, p.seqcycle,
               greatest((select o.seq from {{table}} as o order by o.seq desc limit 1),
                        (select h.purged_published_seq from {{related:group_high_water}} as h
                         order by h.purged_published_seq desc limit 1),
                        (select d.highest_seq from {{related:deleted_on_publish}} as d))
        from %1$s as s, pg_sequence as p
        where p.seqrelid = %1$L::regclass
      $body$
    $function$,
    pg_get_serial_sequence('{{table}}', 'seq'));
  revoke execute on function {{related:order_key_state}}() from public;
  execute format('grant execute on function {{related:order_key_state}}() to %I', relay_role);

  -- 10. The relay updates (and locks) pending rows only; what it sets them to is its grants' business (without
  -- WITH CHECK, USING would also be applied to the new row, refusing every mark).
  execute format(
    'create policy relay_updates_pending_rows on {{table}} as restrictive for update to %I '
    'using (processed_at is null and dead_lettered_at is null) with check (true)', relay_role);

  -- 8. Marks are derived: the seq of a row of the group. Both roles read the outbox already.
  execute 'alter table {{related:group_high_water}} enable row level security';
  execute 'create policy any_role on {{related:group_high_water}} as permissive for all to public '
          'using (true) with check (true)';
  execute format(
    'create policy marks_are_derived_on_insert on {{related:group_high_water}} as restrictive for insert to %I, %I '
    'with check (exists (select from {{table}} as o where o.seq = purged_published_seq '
    'and o.aggregate_id = {{related:group_high_water}}.aggregate_id))', relay_role, purge_role);
  execute format(
    'create policy marks_are_derived_on_update on {{related:group_high_water}} as restrictive for update to %I, %I '
    'using (true) with check (exists (select from {{table}} as o where o.seq = purged_published_seq '
    'and o.aggregate_id = {{related:group_high_water}}.aggregate_id))', relay_role, purge_role);
end;
$migration$;
