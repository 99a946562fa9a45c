import { checkRolesHere } from "../db/rolesHere.ts";
import { type Queryable, type SessionPool, withTransaction } from "../db/session.ts";
import { ConfigError } from "../outbox/errors.ts";
import type { OutboxNames } from "../outbox/names.ts";

/** The order key (seq) has run backwards or can: relaying now would let events overtake each other unnoticed. */
export class OrderKeyError extends ConfigError {
  override name = "OrderKeyError";
}

const BIGINT_MAX = 9223372036854775807n;

interface OrderKeyState {
  sequence_name: string;
  next_seq: string;
  sequence_increment: string;
  sequence_cache: string;
  sequence_max: string;
  sequence_cycle: boolean;
  highest_seq: string | null;
}

/**
 * Refuses to relay when the order key cannot be trusted (migrations 0010 and 0016, {{related:order_key_state}},
 * in the outbox's private schema so no role that owns the outbox's schema can stand in for it):
 * - the sequence's next value is not above the greatest seq ever used: any row of the table (pending, published,
 *   dead) or a purged one (the purge's per-group high-water marks). A restore into a fresh sequence, a backlog
 *   moved between databases, a setval or restart lower, a Blue/Green switchover whose green sequence lagged:
 *   a new event would take a seq below (or equal to) one its group already has, and be claimed before it or
 *   dropped by a consumer that skips "older" seqs. A forward restart (`restart with N`, is_called = false: the
 *   next value is N itself) passes;
 * - the sequence does not count up by one value per nextval in every session (INCREMENT < 1, CACHE > 1: two
 *   sessions draw from ranges of their own, so a group's later commit can take the smaller seq);
 * - the sequence can wrap (CYCLE: after its maximum the next event takes its minimum, before every earlier
 *   event of its group) or has nothing left (at its maximum, inserts fail: better said before they do).
 * Two index descents (max(seq), max high-water mark), asked before an invocation claims and again before the
 * first round on a new database target (OrderKeyGuard). The error names the fix (docs/operations.md, "The order
 * key").
 */
export async function checkOrderKey(db: Queryable, names: OutboxNames): Promise<void> {
  const { rows } = await db.query<OrderKeyState>(`select * from ${names.related("order_key_state")}()`);
  const state = rows[0];
  if (state === undefined) return;
  const sequence = state.sequence_name;
  const cache = BigInt(state.sequence_cache);
  if (cache > 1n) {
    throw new OrderKeyError(
      `the order key's sequence ${sequence} has CACHE ${cache}: sessions draw seqs from ranges of their ` +
        `own, so a later commit can take a smaller seq; run \`alter sequence ${sequence} cache 1\``,
    );
  }
  if (state.sequence_cycle) {
    throw new OrderKeyError(
      `the order key's sequence ${sequence} has CYCLE: past its maximum it starts again at its minimum, and ` +
        `a group's next event would take a smaller seq than its earlier ones; run \`alter sequence ${sequence} no cycle\``,
    );
  }
  const increment = BigInt(state.sequence_increment);
  if (increment < 1n) {
    throw new OrderKeyError(
      `the order key's sequence ${sequence} has INCREMENT ${increment}: each new event would take a smaller ` +
        `seq than the one before; run \`alter sequence ${sequence} increment by 1\``,
    );
  }
  const next = BigInt(state.next_seq);
  const max = BigInt(state.sequence_max);
  if (next > max) {
    const fix =
      max < BIGINT_MAX
        ? `run \`alter sequence ${sequence} maxvalue ${BIGINT_MAX}\``
        : "the bigint range is used up: the outbox needs a table of its own";
    throw new OrderKeyError(
      `the order key's sequence ${sequence} is at its maximum ${max}: the next insert fails (nextval) ` +
        `and nothing is left to relay in order; ${fix}`,
    );
  }
  if (state.highest_seq === null) return;
  const highest = BigInt(state.highest_seq);
  if (next <= highest) {
    throw new OrderKeyError(
      `the order key ran backwards: sequence ${sequence} would hand out seq ${next} next, not above seq ` +
        `${highest}, the highest this outbox has used (a pending, published or dead row, or a purged group's ` +
        "high-water mark; restored, moved, restarted or setval'd lower?); new events would reach consumers " +
        "before, or with the same seq as, events of their group that came first. Relaying stopped: run " +
        `\`select setval('${sequence}', ${highest})\`, or higher if consumers have seen higher seqs ` +
        "(docs/operations.md, The order key)",
    );
  }
}

/**
 * Runs checkOrderKey, and checkRolesHere (a clone or a restore whose outbox still names another database's roles
 * is refused until `outbox migrate` gives it its own: db/rolesHere.ts), once per database target of a pool: an invocation makes a guard, checks before it claims,
 * and each round asks `ensure` on its own session inside its transaction before claiming. A pool that follows a
 * moved secret (SecretPool) tells which target a session belongs to (`targetOf`), so the first round on a new
 * target runs the check there, on the very session that then claims; a pool with one target checks once.
 * A failed check leaves the target unchecked: every later round there fails the same way.
 */
export class OrderKeyGuard {
  readonly #pool: SessionPool;
  readonly #names: OutboxNames;
  readonly #checked = new Set<number>();

  constructor(pool: SessionPool, names: OutboxNames) {
    this.#pool = pool;
    this.#names = names;
  }

  async ensure(session: Queryable): Promise<void> {
    const target = this.#pool.targetOf?.(session) ?? 0;
    if (this.#checked.has(target)) return;
    await checkRolesHere(session, this.#names);
    await checkOrderKey(session, this.#names);
    this.#checked.add(target);
  }

  /** In a transaction of its own, within `statementTimeoutMs`: what an invocation runs before its first round. */
  check(statementTimeoutMs: number): Promise<void> {
    return withTransaction(this.#pool, (client) => this.ensure(client), { statementTimeoutMs });
  }
}
