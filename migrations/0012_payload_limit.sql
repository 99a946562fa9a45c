-- Payloads larger than a message, through S3 (issue 31, the claim check: docs/large-payloads.md).
--
-- The insert trigger (0006, 0009) refused a payload whose JSON text is over 1.5 MiB, the jsonb text of SQS's
-- 1 MiB maximum. With the claim check the relay sends such a payload as a pointer to an S3 object, so the bound
-- follows a setting: the one row of {{related:limits}}, `max_payload_bytes` (compact JSON bytes; 1 MiB by
-- default, as before; at most 64 MiB, the relay's OUTBOX_MAX_PAYLOAD_BYTES limit). Raising it is one statement
-- by the outbox's owner (the migration user; docs/large-payloads.md):
--   update outbox_limits set max_payload_bytes = 67108864;
-- and takes effect for the next insert. A row, not a GUC or a function argument: the trigger runs as its owner
-- (SECURITY DEFINER) and reads it in one primary-key lookup per insert; producers cannot change it (no grant).
--
-- The trigger is 0009's with the payload's bound read from that row, headers still bounded at 1.5 MiB (they
-- become message attributes whatever the payload's route), and the print cap raised to the payload's bound when
-- that is higher: a payload is printed once, to be sized, at most as large as the limit allows.
--
-- In place, no rewrite: a new table and CREATE OR REPLACE of the function. ACCESS EXCLUSIVE first, at its final
-- strength (CONTRIBUTING.md), so no insert runs half under the old function and half under the new.

lock table {{table}} in access exclusive mode;

create table {{related:limits}} (
  one_row boolean primary key default true check (one_row),
  max_payload_bytes integer not null default 1048576 check (max_payload_bytes between 1024 and 67108864)
);

comment on table {{related:limits}} is
  'Limits the insert trigger enforces (migration 0012). max_payload_bytes: the largest payload (compact JSON '
  'bytes) the outbox accepts; over 1 MiB needs the relay''s claim check (docs/large-payloads.md).';

insert into {{related:limits}} default values;

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
      begin
        -- The bound counts 6 text bytes per stored byte of a string (`\u0001`), so an ordinary payload at the
        -- limit bounds at ~6 x max_payload_bytes = 4 x max_text and must be printed to be sized. 64 MiB as before
        -- at the default limit; raised with it (at 64 MiB: 384 MiB at most, and only for a payload of control
        -- characters; ~64 MiB and 1.2-2 s for ordinary text), a cost its own producer's insert pays.
        print_cap := greatest(67108864, 4 * max_text);
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

