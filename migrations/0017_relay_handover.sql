-- Hand-over between relay invocations (issue 41). The schedule starts a relay invocation every tick and each one
-- may dwell for the longest gap between two ticks (infra/relayTiming.ts), so without a hand-over about two of
-- them poll the outbox at any moment. With it, each relay slot (one per schedule target, `relays`) has one row
-- here naming the newest invocation that proved it works (it completed a round); an older invocation that sees
-- a newer one named finishes its round and returns.
--
-- A row, not an advisory lock: a session-level advisory lock pins an RDS Proxy connection for the session's life
-- (RDS Proxy "Avoiding pinning"), and a transaction-level one is gone when the relay's short transactions end.
-- The row is written once per invocation and read about once a second by each one alive: no pressure on the
-- outbox's own table, whose claim does not look at it. Nothing about which events are claimed depends on it: it
-- only decides when an invocation stops dwelling (docs/relay.md, "Hand-over between invocations").
--
-- The relay role reads and writes the rows and nothing else; the purge and the producers never touch it.

create table {{related:relay_handover}} (
  slot smallint primary key check (slot >= 0),
  -- The invocation that holds the slot: the newest one that completed a round.
  invocation text not null,
  -- When it started, on its own clock; a newer start takes the slot over, an older one never does.
  started_at timestamptz not null,
  -- When it proved itself (database clock), for operators reading the table.
  proved_at timestamptz not null default now()
);

comment on table {{related:relay_handover}} is
  'Relay hand-over: per relay slot, the newest invocation that completed a round; older ones stop dwelling.';

do $grants$
declare
  relay_role text := (select r.role_name from {{related:roles}} as r where r.job = 'relay');
begin
  execute format('grant select, insert on {{related:relay_handover}} to %I', relay_role);
  execute format('grant update (invocation, started_at, proved_at) on {{related:relay_handover}} to %I', relay_role);
end;
$grants$;
