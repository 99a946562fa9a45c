-- What a producer's own database user needs to call enqueue() on the outbox (default public.outbox_events),
-- beside its privileges on its own tables. Nothing else: no update, no delete, nothing on the relay's columns.
grant usage on schema public to orders_service;
grant insert on public.outbox_events to orders_service;
-- enqueue() reads back the id and order key of the rows it inserted (`insert ... returning id, seq`).
grant select (id, seq) on public.outbox_events to orders_service;
