-- A second failure counter: tries that failed for reasons on SQS's side, not the message's.
--
-- `attempts` counts only failures the message itself caused (SQS rejected it as the sender's fault, or the
-- relay found it unsendable); it alone moves a row towards RELAY_MAX_ATTEMPTS and a dead letter. Failures
-- that say nothing about the message (SQS unreachable, throttled, timed out, an entry failed with
-- SenderFault = false such as InternalError) are counted here instead: they drive the backoff (capped,
-- jittered) and are retried without limit, so an SQS outage can never turn the backlog into dead letters.
-- Kept so an operator can see that a pending row has been waiting on SQS, and for how many tries.

alter table {{table}}
  add column transient_failures integer not null default 0 check (transient_failures >= 0);

create or replace view {{related:dead_letters}} as
  select id, seq, aggregate_type, aggregate_id, event_type, payload, headers, attempts, last_error,
         created_at, dead_lettered_at, transient_failures
  from {{table}}
  where dead_lettered_at is not null;
