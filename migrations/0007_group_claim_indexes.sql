-- migrate: no-transaction
-- The claim's loose index scan walks message groups (aggregate_id), the destination's ordering unit, instead of
-- (aggregate_type, aggregate_id) (issue 21; the lock side is 0006): a group's head is its smallest pending seq
-- whatever the aggregate type, so Order/42 and Shipment/42 are published in their commit order.
-- Same shapes as 0001's pending_aggregate and 0003's pending_live, keyed by the group: the default mode walks
-- live pending rows only (a parked dead letter costs the scan nothing), strict mode keeps dead letters so they
-- block their group.
--
-- Built CONCURRENTLY (SHARE UPDATE EXCLUSIVE: producers and relays go on); both are partial over pending rows,
-- so their size and build time follow the backlog, not the published rows. Measured on a 1M-row table
-- (docs/operations.md, "Upgrading to 0006/0007").
--
-- 0003's pending_live and 0001's pending_aggregate, keyed by (type, id), are dropped once these exist: kept, a
-- planner whose statistics saw no pending row picked pending_live for the group walk (an index scan on its
-- second column and a sort per step, the 30 s plan 0003 describes; test/claim.plan.test.ts caught it), and
-- each insert would pay two more index entries. A relay one version behind claims without its index until the
-- deploy replaces it (minutes); deploy the relay with this migration (docs/operations.md).

-- pending_group first: between indexes that cost the same (statistics that saw no pending row) the planner
-- takes the one created last, which must be the live one for the default mode's walk.
create index concurrently if not exists {{name:pending_group}} on {{table}} (aggregate_id, seq)
  where processed_at is null;

create index concurrently if not exists {{name:pending_group_live}} on {{table}} (aggregate_id, seq)
  where processed_at is null and dead_lettered_at is null;

drop index concurrently if exists {{related:pending_live}};

drop index concurrently if exists {{related:pending_aggregate}};
