import type pg from "pg";
import { withTransaction } from "../../functions/shared/db/session.ts";
import {
  type EnqueuedEvent,
  type EnqueueOptions,
  enqueue,
  type OutboxEvent,
} from "../../functions/shared/produce/enqueue.ts";

/**
 * Events written and committed by themselves, for tests that need rows in the outbox and no business write:
 * enqueue refuses a pool (its events would not join a transaction), so this begins one on a session of `pool`.
 */
export function enqueueCommitted<T>(
  pool: pg.Pool,
  event: OutboxEvent<T>,
  options?: EnqueueOptions,
): Promise<EnqueuedEvent>;
export function enqueueCommitted<T>(
  pool: pg.Pool,
  events: readonly OutboxEvent<T>[],
  options?: EnqueueOptions,
): Promise<EnqueuedEvent[]>;
export function enqueueCommitted<T>(
  pool: pg.Pool,
  input: OutboxEvent<T> | readonly OutboxEvent<T>[],
  options?: EnqueueOptions,
): Promise<EnqueuedEvent | EnqueuedEvent[]> {
  return withTransaction(
    pool,
    async (client): Promise<EnqueuedEvent | EnqueuedEvent[]> =>
      Array.isArray(input)
        ? enqueue(client, input as readonly OutboxEvent<T>[], options)
        : enqueue(client, input as OutboxEvent<T>, options),
  );
}
