-- The producer's trace context, carried end to end (issue 31): the W3C `traceparent` and `tracestate` of the span
-- that was active when the event was written. `enqueue` fills them from the active OpenTelemetry context (the
-- caller's 4 headers stay the caller's); a producer writing plain SQL sets them itself, or leaves them null.
-- The relay sends them on as the SQS `AWSTraceHeader` system attribute (X-Ray form), a `traceparent` /
-- `tracestate` message attribute, EventBridge's TraceHeader, and in the Kinesis and EventBridge envelope
-- (docs/tracing.md).
--
-- Cheap on a big table: a nullable column without a default is a catalog change only, no rewrite and no scan
-- (PostgreSQL docs, ALTER TABLE, "Notes": adding a column with no default needs no rewrite); the ACCESS EXCLUSIVE
-- lock is held for that catalog update alone. No CHECK constraint: validating one would scan the table, and its
-- violation message names only the constraint; the trigger below checks the new values with errors that name
-- the column and the rule, as the commit-order trigger does for payloads (0006).
alter table {{table}}
  add column traceparent text,
  add column tracestate text;

comment on column {{table}}.traceparent is
  'W3C traceparent of the producer''s span (00-<32 hex>-<16 hex>-<2 hex>), or null; sent as AWSTraceHeader and traceparent';
comment on column {{table}}.tracestate is
  'W3C tracestate (at most 512 characters, 1-32 key=value members) accompanying traceparent, or null';

-- Invoker's rights: it reads NEW only. Fires on INSERT and when either column is set by UPDATE (an operator's
-- fix-up); only rows that carry a context pay more than two null tests.
create function {{related:check_trace_context}}() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
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
$$;

revoke execute on function {{related:check_trace_context}}() from public;

create trigger {{name:trace_context}}
  before insert or update of traceparent, tracestate on {{table}}
  for each row execute function {{related:check_trace_context}}();

-- ALWAYS, as 0006's triggers: replicated and session_replication_role = replica inserts are checked too.
alter table {{table}} enable always trigger {{name:trace_context}};
