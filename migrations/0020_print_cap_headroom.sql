-- The insert trigger of 0012, with room in its print cap for the jsonb around a payload at the limit.
--
-- 0012 printed a payload to size it only when its bound (6 x its stored bytes for strings) was at most
-- 4 x max_text = 6 x max_payload_bytes: a payload of one string at exactly max_payload_bytes stores a few bytes
-- more than its JSON and was refused ("could be up to 402653238 bytes") although the write API had accepted it.
-- The cap now leaves 64 KiB of stored headers x 6 above that; the server prints at most 384.4 MiB at the 64 MiB
-- limit, as before within 0.1 %. Same function, same trigger, CREATE OR REPLACE; ACCESS EXCLUSIVE first, as in
-- 0012, so no insert runs half under the old function and half under the new.

lock table {{table}} in access exclusive mode;

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
        -- The bound counts 6 text bytes per stored byte of a string (`\u0001`), and a string's jsonb is a few
        -- bytes more than its JSON (varlena and container headers, one JEntry per value), so a payload of strings
        -- at the limit bounds at 6 x (max_payload_bytes + those bytes): over 0012's 4 x max_text, which refused
        -- one string at exactly 64 MiB (bound 402,653,238 > 402,653,184). 64 KiB of headroom for them, x 6.
        print_cap := greatest(67108864, 4 * max_text + 6 * 65536);
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

