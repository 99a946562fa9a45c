-- What a producer's own database user needs to call enqueue() on the outbox (default public.outbox_events),
-- beside its privileges on its own tables. Nothing else: no update, no delete, nothing on the relay's columns.
grant usage on schema public to orders_service;
grant insert on public.outbox_events to orders_service;
-- enqueue() reads back the id and order key of the rows it inserted (`insert ... returning id, seq`).
grant select (id, seq) on public.outbox_events to orders_service;
-- enqueue() of events for several aggregates locks them in one order through these functions (migrations 0005, 0006: one lock per message group).
-- Postgres grants EXECUTE to PUBLIC by default; these lines matter where that default was revoked.
grant execute on function public.outbox_lock_aggregates(text[], text[]) to orders_service;
grant execute on function "outbox_private:public.outbox_events".outbox_group_lock_key(text) to orders_service;
