-- migrate: no-transaction
-- An insert writes three index entries instead of four (issue 33): 0007's pending_group ((aggregate_id, seq) of
-- every unpublished row, dead letters included) is replaced by pending_dead, the same key over the unpublished
-- dead letters only. Every new row is pending and live, so it went into both pending_group and
-- pending_group_live: two entries of the same key. Now it goes into pending_group_live only, and a row enters
-- pending_dead when the relay dead-letters it (rare: a new version of the row then, which is not HOT anyway).
--
-- Measured (bench `wal`, pg_walinspect's pg_get_wal_stats over each stage; docs/benchmarks.md, "Where the bytes
-- go"): pending_group cost each event one B-tree leaf insert of ~64 B of WAL plus its share of page splits,
-- ~80 B of the insert's ~784 B. In retention `delete` an event's whole life is the insert, a row lock and a
-- delete record, so that index was a tenth of everything the outbox wrote for it.
--
-- What read pending_group reads both partial indexes now, each through its own predicate:
-- - strict mode's claim walk (a dead head blocks its group): each step takes the first entry past the previous
--   group in each index and keeps the smaller (claimBatch.ts); pending_dead is empty in a healthy outbox, so
--   that is one more descent of a tiny index per group,
-- - the snapshot (observe/sql/outboxSnapshot.ts): live and dead rows counted apart, a group's head as the
--   smaller of its first live and first dead seq,
-- - `delete` retention's "did this event overtake a dead letter of its group?" (recordOutcomes.ts): a descent
--   of pending_dead instead of pending_group, so nothing to read when there are no dead letters.
--
-- Built CONCURRENTLY, pending_dead first, then pending_group dropped CONCURRENTLY (SHARE UPDATE EXCLUSIVE:
-- producers and relays go on). A relay or purge one version behind still names the old predicate: in the
-- default mode its claim never used pending_group; in strict mode its claim, and the purge's snapshot, lose their
-- index until the deploy replaces them (statements then time out; rounds fail and retry, nothing is lost).
-- Deploy the relay and the purge with this migration, as with 0007 and 0010.

create index concurrently if not exists {{name:pending_dead}} on {{table}} (aggregate_id, seq)
  where processed_at is null and dead_lettered_at is not null;

drop index concurrently if exists {{related:pending_group}};
