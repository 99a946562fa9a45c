-- columns
outbox_dead_letters.id uuid
outbox_dead_letters.seq bigint
outbox_dead_letters.aggregate_type text
outbox_dead_letters.aggregate_id text
outbox_dead_letters.event_type text
outbox_dead_letters.payload jsonb
outbox_dead_letters.headers jsonb
outbox_dead_letters.attempts integer
outbox_dead_letters.last_error text
outbox_dead_letters.created_at timestamp with time zone
outbox_dead_letters.dead_lettered_at timestamp with time zone
outbox_dead_letters.transient_failures integer
outbox_events.id uuid not null default gen_random_uuid()
outbox_events.seq bigint not null generated always as identity
outbox_events.aggregate_type text not null
outbox_events.aggregate_id text not null
outbox_events.event_type text not null
outbox_events.payload jsonb not null
outbox_events.headers jsonb not null default '{}'::jsonb
outbox_events.attempts integer not null default 0
outbox_events.last_error text
outbox_events.created_at timestamp with time zone not null default now()
outbox_events.available_at timestamp with time zone not null default now()
outbox_events.processed_at timestamp with time zone
outbox_events.dead_lettered_at timestamp with time zone
outbox_events.transient_failures integer not null default 0
outbox_events.text_bytes_bound integer
outbox_events.traceparent text
outbox_events.tracestate text
outbox_migrations.name text not null
outbox_migrations.checksum text not null
outbox_migrations.applied_at timestamp with time zone not null default now()
outbox_relay_handover.slot smallint not null
outbox_relay_handover.invocation text not null
outbox_relay_handover.started_at timestamp with time zone not null
outbox_relay_handover.proved_at timestamp with time zone not null default now()

-- constraints
outbox_events outbox_events_aggregate_id_check CHECK (((char_length(aggregate_id) >= 1) AND (char_length(aggregate_id) <= 128)))
outbox_events outbox_events_aggregate_type_check CHECK (((char_length(aggregate_type) >= 1) AND (char_length(aggregate_type) <= 256)))
outbox_events outbox_events_attempts_check CHECK ((attempts >= 0))
outbox_events outbox_events_event_type_check CHECK (((char_length(event_type) >= 1) AND (char_length(event_type) <= 256)))
outbox_events outbox_events_headers_check CHECK ((jsonb_typeof(headers) = 'object'::text))
outbox_events outbox_events_pkey PRIMARY KEY (id)
outbox_events outbox_events_transient_failures_check CHECK ((transient_failures >= 0))
outbox_events outbox_published_or_dead CHECK (((processed_at IS NULL) OR (dead_lettered_at IS NULL)))
outbox_migrations outbox_migrations_pkey PRIMARY KEY (name)
outbox_relay_handover outbox_relay_handover_pkey PRIMARY KEY (slot)
outbox_relay_handover outbox_relay_handover_slot_check CHECK ((slot >= 0))

-- indexes
CREATE INDEX outbox_dead_lettered_at ON public.outbox_events USING btree (dead_lettered_at) WHERE (dead_lettered_at IS NOT NULL)
CREATE UNIQUE INDEX outbox_events_pkey ON public.outbox_events USING btree (id)
CREATE UNIQUE INDEX outbox_migrations_pkey ON public.outbox_migrations USING btree (name)
CREATE INDEX outbox_pending_dead ON public.outbox_events USING btree (aggregate_id, seq) WHERE ((processed_at IS NULL) AND (dead_lettered_at IS NOT NULL))
CREATE INDEX outbox_pending_group_live ON public.outbox_events USING btree (aggregate_id, seq) WHERE ((processed_at IS NULL) AND (dead_lettered_at IS NULL))
CREATE INDEX outbox_processed_at ON public.outbox_events USING btree (processed_at) WHERE (processed_at IS NOT NULL)
CREATE UNIQUE INDEX outbox_relay_handover_pkey ON public.outbox_relay_handover USING btree (slot)
CREATE INDEX outbox_seq ON public.outbox_events USING btree (seq)

-- storage
outbox_events autovacuum_vacuum_scale_factor=0.01, autovacuum_vacuum_threshold=1000, autovacuum_vacuum_insert_scale_factor=0.01, autovacuum_analyze_scale_factor=0.02, autovacuum_vacuum_cost_delay=0

-- views
outbox_dead_letters:  SELECT id, seq, aggregate_type, aggregate_id, event_type, payload, headers, attempts, last_error, created_at, dead_lettered_at, transient_failures FROM outbox_events WHERE dead_lettered_at IS NOT NULL;

-- functions
CREATE OR REPLACE FUNCTION public.outbox_aggregate_lock_key(aggregate_type text, aggregate_id text)
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select pg_catalog.hashtextextended(aggregate_id,
    pg_catalog.hashtextextended(aggregate_type, pg_catalog.hashtextextended('"public"."outbox_events"', 0)))
$function$
CREATE OR REPLACE FUNCTION public.outbox_lock_aggregates(aggregate_types text[], aggregate_ids text[])
 RETURNS boolean
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
declare
  key bigint;
begin
  for key in
    select distinct "outbox_private:public.outbox_events"."outbox_group_lock_key"(a.aggregate_id)
    from unnest(aggregate_ids) as a(aggregate_id)
    order by 1
  loop
    perform pg_advisory_xact_lock(key);
  end loop;
  return true;
end;
$function$
CREATE OR REPLACE FUNCTION public.outbox_notify()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  perform pg_notify(tg_table_name, '');
  return null;
end;
$function$

-- triggers
CREATE TRIGGER outbox_commit_order BEFORE INSERT ON public.outbox_events FOR EACH ROW EXECUTE FUNCTION "outbox_private:public.outbox_events".outbox_commit_order()
CREATE TRIGGER outbox_notify AFTER INSERT ON public.outbox_events FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify()
CREATE TRIGGER outbox_text_bound BEFORE UPDATE OF payload, headers ON public.outbox_events FOR EACH ROW EXECUTE FUNCTION "outbox_private:public.outbox_events".outbox_commit_order()
CREATE TRIGGER outbox_trace_context BEFORE INSERT OR UPDATE OF traceparent, tracestate ON public.outbox_events FOR EACH ROW EXECUTE FUNCTION "outbox_private:public.outbox_events".outbox_check_trace_context()

-- row security
outbox_events enabled

-- policies
outbox_events any_role PERMISSIVE for ALL to public using true with check true
outbox_events purge_deletes_settled_rows RESTRICTIVE for DELETE to <outbox purge role> using ((processed_at IS NOT NULL) OR (dead_lettered_at IS NOT NULL))
outbox_events purge_locks_settled_rows RESTRICTIVE for UPDATE to <outbox purge role> using ((processed_at IS NOT NULL) OR (dead_lettered_at IS NOT NULL))
outbox_events relay_deletes_pending_rows RESTRICTIVE for DELETE to <outbox relay role> using ((processed_at IS NULL) AND (dead_lettered_at IS NULL))
outbox_events relay_updates_pending_rows RESTRICTIVE for UPDATE to <outbox relay role> using ((processed_at IS NULL) AND (dead_lettered_at IS NULL)) with check true

-- privileges
column outbox_events.attempts to <outbox relay role>: UPDATE
column outbox_events.available_at to <outbox relay role>: UPDATE
column outbox_events.dead_lettered_at to <outbox relay role>: UPDATE
column outbox_events.last_error to <outbox purge role>: UPDATE
column outbox_events.last_error to <outbox relay role>: UPDATE
column outbox_events.processed_at to <outbox relay role>: UPDATE
column outbox_events.transient_failures to <outbox relay role>: UPDATE
column outbox_relay_handover.invocation to <outbox relay role>: UPDATE
column outbox_relay_handover.proved_at to <outbox relay role>: UPDATE
column outbox_relay_handover.started_at to <outbox relay role>: UPDATE
function outbox_aggregate_lock_key(text,text) to PUBLIC: EXECUTE
function outbox_lock_aggregates(text[],text[]) to PUBLIC: EXECUTE
function outbox_notify() to PUBLIC: EXECUTE
sequence outbox_events_seq_seq to <outbox relay role>: SELECT
table outbox_events to <outbox purge role>: DELETE, SELECT
table outbox_events to <outbox relay role>: DELETE, SELECT
table outbox_relay_handover to <outbox relay role>: INSERT, SELECT

-- schema outbox_private:public.outbox_events
-- columns
outbox_deleted_on_publish.only_row boolean not null default true
outbox_deleted_on_publish.events bigint not null default 0
outbox_deleted_on_publish.highest_seq bigint
outbox_group_high_water.aggregate_id text not null
outbox_group_high_water.purged_published_seq bigint not null
outbox_limits.one_row boolean not null default true
outbox_limits.max_payload_bytes integer not null default 1048576
outbox_limits.max_message_bytes integer not null default 1048576
outbox_limits.limited_by text
outbox_limits.claim_check boolean not null default false
outbox_roles.job text not null
outbox_roles.role_name text not null
outbox_roles.database_oid oid
outbox_roles.previous_role_name text

-- constraints
outbox_deleted_on_publish outbox_deleted_on_publish_only_row_check CHECK (only_row)
outbox_deleted_on_publish outbox_deleted_on_publish_pkey PRIMARY KEY (only_row)
outbox_group_high_water outbox_group_high_water_pkey PRIMARY KEY (aggregate_id)
outbox_limits outbox_limits_limited_by_check CHECK ((octet_length(limited_by) <= 1024))
outbox_limits outbox_limits_max_message_bytes_check CHECK (((max_message_bytes >= 1024) AND (max_message_bytes <= 1048576)))
outbox_limits outbox_limits_max_payload_bytes_check CHECK (((max_payload_bytes >= 1024) AND (max_payload_bytes <= 67108864)))
outbox_limits outbox_limits_one_row_check CHECK (one_row)
outbox_limits outbox_limits_pkey PRIMARY KEY (one_row)
outbox_roles outbox_roles_job_check CHECK ((job = ANY (ARRAY['relay'::text, 'purge'::text])))
outbox_roles outbox_roles_pkey PRIMARY KEY (job)
outbox_roles outbox_roles_role_name_key UNIQUE (role_name)

-- indexes
CREATE UNIQUE INDEX outbox_deleted_on_publish_pkey ON "outbox_private:public.outbox_events".outbox_deleted_on_publish USING btree (only_row)
CREATE UNIQUE INDEX outbox_group_high_water_pkey ON "outbox_private:public.outbox_events".outbox_group_high_water USING btree (aggregate_id)
CREATE INDEX outbox_group_high_water_seq ON "outbox_private:public.outbox_events".outbox_group_high_water USING btree (purged_published_seq)
CREATE UNIQUE INDEX outbox_limits_pkey ON "outbox_private:public.outbox_events".outbox_limits USING btree (one_row)
CREATE UNIQUE INDEX outbox_roles_pkey ON "outbox_private:public.outbox_events".outbox_roles USING btree (job)
CREATE UNIQUE INDEX outbox_roles_role_name_key ON "outbox_private:public.outbox_events".outbox_roles USING btree (role_name)

-- storage

-- views

-- functions
CREATE OR REPLACE FUNCTION "outbox_private:public.outbox_events".outbox_check_trace_context()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
begin
  if new.traceparent is not null and (
       new.traceparent !~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
       or substr(new.traceparent, 4, 32) = repeat('0', 32)
       or substr(new.traceparent, 37, 16) = repeat('0', 16)) then
    raise exception using errcode = 'check_violation',
      message = format('outbox traceparent: %s is not a W3C traceparent (00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, lowercase, ids not all zero)',
                       quote_literal(left(new.traceparent, 80))),
      hint = 'write null for an event without trace context';
  end if;
  if new.tracestate is not null then
    if new.traceparent is null then
      raise exception using errcode = 'check_violation',
        message = 'outbox tracestate: set without a traceparent (W3C Trace Context: tracestate accompanies a traceparent)';
    end if;
    if length(new.tracestate) > 512 then
      raise exception using errcode = 'check_violation',
        message = format('outbox tracestate: is %s characters, the limit is 512 (what every W3C platform propagates)',
                         length(new.tracestate));
    end if;
    if cardinality(string_to_array(new.tracestate, ',')) > 32 or exists (
         select from unnest(string_to_array(new.tracestate, ',')) as m(member)
         where btrim(m.member, E' \t') !~ '^[a-z0-9][a-z0-9_*/@-]{0,255}=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$') then
      raise exception using errcode = 'check_violation',
        message = format('outbox tracestate: %s is not a W3C tracestate (1-32 comma-separated key=value members)',
                         quote_literal(left(new.tracestate, 80)));
    end if;
  end if;
  return new;
end;
$function$
CREATE OR REPLACE FUNCTION "outbox_private:public.outbox_events".outbox_commit_order()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
      declare
        -- jsonb's text of a payload whose compact JSON is max_payload_bytes: 1.5 x (a space after `,` and `:`).
        max_text constant bigint := (select l.max_payload_bytes::bigint * 3 / 2 from "outbox_private:public.outbox_events"."outbox_limits" as l);
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
        if tg_relid is distinct from '"public"."outbox_events"'::regclass then
          raise exception using errcode = 'insufficient_privilege',
            message = format('%s() runs only as the trigger of %s, not of %s',
                             '"outbox_private:public.outbox_events"."outbox_commit_order"', '"public"."outbox_events"', tg_relid::regclass);
        end if;
        -- Small and uncompressed (most events): printing is bounded already and cheaper than the bound (0012).
        if pg_column_compression(new.payload) is null and pg_column_size(new.payload) <= 6370 then
          payload_bytes := octet_length(new.payload::text);
        else
          payload_bytes := "outbox_private:public.outbox_events"."outbox_text_bound"(new.payload);
          if payload_bytes > max_text and payload_bytes <= print_cap then
            payload_bytes := octet_length(new.payload::text);
          end if;
        end if;
        if payload_bytes > max_text then
          raise exception using errcode = 'check_violation',
            message = format('outbox payload: its JSON text %s %s bytes, over %s (the text of max_payload_bytes %s in %s)',
                             case when payload_bytes > print_cap then 'could be up to' else 'is' end,
                             payload_bytes, max_text, max_text * 2 / 3, '"outbox_private:public.outbox_events"."outbox_limits"'),
            hint = 'numbers are printed in full: send very large or very precise numbers as strings; larger '
                   'payloads need the claim check and a raised limit (docs/large-payloads.md)';
        end if;
        if pg_column_compression(new.headers) is null and pg_column_size(new.headers) <= 6370 then
          header_bytes := octet_length(new.headers::text);
        else
          header_bytes := "outbox_private:public.outbox_events"."outbox_text_bound"(new.headers);
          if header_bytes > max_header_text and header_bytes <= print_cap then
            header_bytes := octet_length(new.headers::text);
          end if;
        end if;
        if header_bytes > max_header_text then
          raise exception using errcode = 'check_violation',
            message = format('outbox headers: their JSON text %s %s bytes, over %s',
                             case when header_bytes > print_cap then 'could be up to' else 'is' end,
                             header_bytes, max_header_text);
        end if;
        new.text_bytes_bound := payload_bytes + header_bytes;
        if tg_op = 'INSERT' then
          if current_setting('session_replication_role') = 'replica' then
            -- Applied by logical replication or replayed from a dump: the seq is the one its origin gave it, in
            -- its group's order there. Keep it, and raise the sequence past it (under a lock of its own, so two
            -- apply sessions cannot lower it), so events written here later come after it.
            perform pg_advisory_xact_lock(hashtextextended('"public"."outbox_events" sequence', 0));
            if new.seq > (select case when s.is_called then s.last_value else s.last_value - 1 end from public.outbox_events_seq_seq as s) then
              perform setval('public.outbox_events_seq_seq'::regclass, new.seq);
            end if;
          else
            if new.processed_at is null and new.dead_lettered_at is null then
              perform pg_advisory_xact_lock("outbox_private:public.outbox_events"."outbox_group_lock_key"(new.aggregate_id));
            end if;
            drawn := nextval('public.outbox_events_seq_seq'::regclass);
            -- The identity default drew its value before this draw: a larger one came from elsewhere.
            if new.seq > drawn then
              raise exception using errcode = 'object_not_in_prerequisite_state',
                message = format('outbox seq %s: this row carries a seq above the %s its outbox would give it (a '
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
      $function$
CREATE OR REPLACE FUNCTION "outbox_private:public.outbox_events".outbox_group_lock_key(aggregate_id text)
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select pg_catalog.hashtextextended(aggregate_id, pg_catalog.hashtextextended('"public"."outbox_events" group', 0))
$function$
CREATE OR REPLACE FUNCTION "outbox_private:public.outbox_events".outbox_high_water_only_rises()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
begin
  new.purged_published_seq := greatest(old.purged_published_seq, new.purged_published_seq);
  return new;
end;
$function$
CREATE OR REPLACE FUNCTION "outbox_private:public.outbox_events".outbox_order_key_state()
 RETURNS TABLE(sequence_name text, next_seq numeric, sequence_increment bigint, sequence_cache bigint, sequence_max bigint, sequence_cycle boolean, highest_seq bigint)
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
        select 'public.outbox_events_seq_seq'::text,
               case when s.is_called then s.last_value::numeric + p.seqincrement else s.last_value end,
               p.seqincrement, p.seqcache, p.seqmax, p.seqcycle,
               greatest((select o.seq from "public"."outbox_events" as o order by o.seq desc limit 1),
                        (select h.purged_published_seq from "outbox_private:public.outbox_events"."outbox_group_high_water" as h
                         order by h.purged_published_seq desc limit 1),
                        (select d.highest_seq from "outbox_private:public.outbox_events"."outbox_deleted_on_publish" as d))
        from public.outbox_events_seq_seq as s, pg_sequence as p
        where p.seqrelid = 'public.outbox_events_seq_seq'::regclass
      $function$
CREATE OR REPLACE FUNCTION "outbox_private:public.outbox_events".outbox_text_bound(value jsonb)
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select 6 * case when pg_catalog.pg_column_compression(value) is null then pg_catalog.pg_column_size(value)::bigint
                  else pg_catalog.pg_column_size(pg_catalog.jsonb_build_array(value))::bigint end
         + coalesce((
             select sum(case when abs(n::numeric) < 1e16 then 16 when abs(n::numeric) < 1e300 then 300 else 131072 end
                        + pg_catalog.scale(n::numeric) + 4)
             from pg_catalog.jsonb_path_query(value, 'strict $.** ? (@.type() == "number")') as n
           ), 0)
$function$

-- triggers
CREATE TRIGGER outbox_high_water_only_rises BEFORE UPDATE ON "outbox_private:public.outbox_events".outbox_group_high_water FOR EACH ROW EXECUTE FUNCTION "outbox_private:public.outbox_events".outbox_high_water_only_rises()

-- row security
outbox_group_high_water enabled

-- policies
outbox_group_high_water any_role PERMISSIVE for ALL to public using true with check true
outbox_group_high_water marks_are_derived_on_insert RESTRICTIVE for INSERT to <outbox purge role>, <outbox relay role> with check (EXISTS ( SELECT
   FROM outbox_events o
  WHERE ((o.seq = outbox_group_high_water.purged_published_seq) AND (o.aggregate_id = outbox_group_high_water.aggregate_id))))
outbox_group_high_water marks_are_derived_on_update RESTRICTIVE for UPDATE to <outbox purge role>, <outbox relay role> using true with check (EXISTS ( SELECT
   FROM outbox_events o
  WHERE ((o.seq = outbox_group_high_water.purged_published_seq) AND (o.aggregate_id = outbox_group_high_water.aggregate_id))))

-- privileges
column outbox_deleted_on_publish.events to <outbox relay role>: UPDATE
column outbox_deleted_on_publish.highest_seq to <outbox relay role>: UPDATE
column outbox_group_high_water.purged_published_seq to <outbox purge role>: UPDATE
column outbox_group_high_water.purged_published_seq to <outbox relay role>: UPDATE
function "outbox_private:public.outbox_events".outbox_group_lock_key(text) to PUBLIC: EXECUTE
function "outbox_private:public.outbox_events".outbox_order_key_state() to <outbox relay role>: EXECUTE
function "outbox_private:public.outbox_events".outbox_text_bound(jsonb) to PUBLIC: EXECUTE
table outbox_deleted_on_publish to <outbox purge role>: SELECT
table outbox_deleted_on_publish to <outbox relay role>: SELECT
table outbox_group_high_water to <outbox purge role>: INSERT, SELECT
table outbox_group_high_water to <outbox relay role>: INSERT, SELECT
table outbox_limits to PUBLIC: SELECT
table outbox_roles to <outbox purge role>: SELECT
table outbox_roles to <outbox relay role>: SELECT
