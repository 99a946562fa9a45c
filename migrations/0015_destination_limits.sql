-- One message limit from the destination to the producer (issue 38): the limits row (0012) also holds what the
-- relay's destinations accept, so the write API refuses at the insert what the relay could only dead-letter.
--
-- max_message_bytes: the largest message (body plus attributes, as SQS counts it) the write API accepts without
--   the claim check: the smallest limit of the places the relay publishes to (its queue, each route's queue,
--   topic, stream or bus, less an envelope margin for those that carry no attributes:
--   functions/shared/destinations/limits.ts). Default 1 MiB, SQS's maximum and what the relay sends by default.
-- limited_by: which destination sets max_message_bytes (`sqs-fifo:orders.fifo`), for the write API's refusal;
--   null for the default.
-- claim_check: the relay sends a message that does not fit through S3 (docs/large-payloads.md); then
--   max_payload_bytes (0012) is what bounds a payload instead.
--
-- Written at deploy time by the construct's migrations custom resource (from the destinations it knows and its
-- props), or by `outbox migrate --max-message-bytes ... --claim-check`; read by the write API inside its insert
-- (functions/shared/produce/destinationLimits.ts). Producers read the row and cannot write it: SELECT to PUBLIC,
-- as the values are no secret and a producer's role is the service's own (we cannot name it); the owner alone
-- writes. Columns and a grant only: the insert trigger (0012) is not changed.
--
-- Metadata only (a constant default is stored in the catalog, no rewrite), on a one-row table.

alter table {{related:limits}}
  add column max_message_bytes integer not null default 1048576
    check (max_message_bytes between 1024 and 1048576),
  add column limited_by text check (octet_length(limited_by) <= 1024),
  add column claim_check boolean not null default false;

comment on column {{related:limits}}.max_message_bytes is
  'Largest message (body plus attributes) the write API accepts without the claim check: the smallest limit of '
  'the relay''s destinations (migration 0015). Written by the construct or outbox migrate.';
comment on column {{related:limits}}.limited_by is
  'The destination whose limit max_message_bytes is (for error messages); null: the default.';
comment on column {{related:limits}}.claim_check is
  'Whether the relay sends messages that do not fit through S3 (then max_payload_bytes bounds a payload).';

grant select on {{related:limits}} to public;
