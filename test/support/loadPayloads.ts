import type { Queryable } from "../../functions/shared/db/session.ts";
import type { OutboxNames } from "../../functions/shared/outbox/names.ts";
import {
  type LoadedPayload,
  type PayloadLimits,
  walkUnderSavepoints,
} from "../../functions/shared/relay/sql/loadPayloads.ts";

/**
 * Every row through the walk, as before the direct statement existed: the reference the tests compare the
 * direct statement's decisions with, and the bench's A/B baseline.
 */
export async function loadPayloadsByWalk(
  db: Queryable,
  names: OutboxNames,
  ids: readonly string[],
  limits: PayloadLimits,
): Promise<LoadedPayload[]> {
  if (ids.length === 0) return [];
  return walkUnderSavepoints(db, names, ids, limits, limits.budgetBytes, true);
}
