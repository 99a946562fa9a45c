import { randomBytes } from "node:crypto";
import type pg from "pg";
import { outboxNames } from "../../functions/shared/outbox/names.ts";

/**
 * Runs `work` in one transaction as `role` (`set local role`), then commits, or rolls back if it throws. The test
 * harness connects as a superuser; `set local role` makes every privilege check (and `current_user`) the role's,
 * and it works the same behind a transaction pooler, where a login of its own would not (pgbouncer there logs
 * every client in as its own user).
 */
export async function asRole<T>(pool: pg.Pool, role: string, work: (client: pg.PoolClient) => Promise<T>) {
  const client = await pool.connect();
  try {
    await client.query("begin");
    await client.query(`set local role ${quoteRole(role)}`);
    const result = await work(client);
    await client.query("commit");
    return result;
  } catch (error) {
    await client.query("rollback").catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/** A role name no other test file (roles belong to the whole cluster) or earlier run uses. */
export function uniqueRoleName(prefix: string): string {
  return `${prefix}_${randomBytes(4).toString("hex")}`;
}

export function quoteRole(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** The outbox's own roles (migration 0009), as the migration recorded them in `<prefix>_roles`. */
export async function outboxRoles(
  db: pg.Pool,
  schema = "public",
  prefix = "outbox",
): Promise<{ relay: string; purge: string }> {
  const { rows } = await db.query<{ job: "relay" | "purge"; role_name: string }>(
    `select job, role_name from ${outboxNames({ schema, table: `${prefix}_events` }).related("roles")}`,
  );
  const role = (job: string) => {
    const found = rows.find((row) => row.job === job)?.role_name;
    if (found === undefined) throw new Error(`no ${job} role recorded for ${schema}.${prefix}_events`);
    return found;
  };
  return { relay: role("relay"), purge: role("purge") };
}
