/**
 * The two kinds of unpublished row, spelled exactly as the predicates of the partial indexes over them
 * (0007's pending_group_live, 0014's pending_dead): Postgres uses a partial index only for a query whose WHERE
 * clause implies the index's predicate, which it proves for these forms (PostgreSQL docs, "Partial Indexes").
 * Every query that must reach unpublished rows through those indexes builds its condition here, so none can
 * drift from them. `alias` is the table's alias in the query, if it has one.
 */
export function livePending(alias?: string): string {
  const a = alias === undefined ? "" : `${alias}.`;
  return `${a}processed_at is null and ${a}dead_lettered_at is null`;
}

/** An unpublished dead letter (0014's pending_dead); see livePending. */
export function deadPending(alias?: string): string {
  const a = alias === undefined ? "" : `${alias}.`;
  return `${a}processed_at is null and ${a}dead_lettered_at is not null`;
}
