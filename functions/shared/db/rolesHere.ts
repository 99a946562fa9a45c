import { createHash, randomBytes } from "node:crypto";
import { ConfigError, MigrationError } from "../outbox/errors.ts";
import type { OutboxNames } from "../outbox/names.ts";
import type { Queryable } from "./session.ts";
import {
  createRole,
  dependencyList,
  type RecordedRole,
  recordAsMadeHere,
  recordedRoles,
  recordRenewed,
  recordsDatabase,
  roleDependencies,
} from "./sql/rolesHere.ts";

/**
 * An outbox's relay and purge roles belong to the database they were made for (issue 39, finding 6). Roles are
 * the cluster's; a database's grants and policies only name them, and `create database b template a` (or a's
 * dump restored as b in the same cluster) copies those: b's outbox then names a's roles, and a's relay login
 * reads b's payloads and marks b's events published. Migration 0018 records in the roles table the OID of the
 * database the roles were made for (why the OID and not the name: the migration's comment). The runner checks it
 * on every run (ownRoles) and the relay and the purge before they work (checkRolesHere).
 */

/** What ownRoles did to one job's role. */
export interface RolesChange {
  job: "relay" | "purge";
  /** The role the outbox names now. */
  role: string;
  /**
   * `renewed`: a new role, with everything the old one had here; the old one keeps nothing here and its members
   * (logins) are not carried over: grant the new role to this database's logins. `recorded`: the roles were
   * made for a database that no longer uses them (dropped after a clone, or a restore into a new database):
   * kept, and recorded as this one's.
   */
  action: "renewed" | "recorded";
  /** The role before, for `renewed`. */
  previous?: string;
  /** Other databases that named the previous role when it was renewed. */
  sharedWith?: string[];
}

/** What an operator does after a renewal, written once for the CLI and the migrate Lambda's log. */
export const ROLES_RENEWED_HINT = {
  next:
    "the new role has no members: grant it to this database's login for the job (the deploy's migrations do " +
    "it for the logins they make), and use no login of the other database here (docs/database.md, " +
    '"Cloned and restored databases")',
};

export class RolesElsewhereError extends ConfigError {
  override name = "RolesElsewhereError";
}

/**
 * Gives this database roles of its own when the recorded ones were made for another database, in the caller's
 * transaction (the runner's, under its advisory lock). For each job whose roles table row records another
 * database (or none, a clone made before 0018):
 * - still used by another database of the cluster (pg_shdepend): a new role, named as 0009 names
 *   them after this database plus 8 random hex digits (a name nobody can create first: the runner never adopts a
 *   role it did not make, finding 9), gets every grant, default privilege, policy and ownership the old role has
 *   here; the old one's are revoked, and nothing of it may remain here (pg_shdepend), or the transaction fails.
 *   Memberships are the cluster's and are not copied: the old role's members are the other database's logins.
 * - used by no other database: the roles are kept and recorded as this database's. Nothing changes for the
 *   logins: the database they served was dropped or replaced by this one.
 * A recorded role that does not exist is refused: a new one would hold none of the rights.
 * The database whose OID is recorded keeps its roles, whoever runs first: the clone renews, never the original.
 */
export async function ownRoles(client: Queryable, names: OutboxNames): Promise<RolesChange[]> {
  const rolesTable = names.related("roles");
  if (!(await recordsDatabase(client, rolesTable))) return [];
  const strangers = (await recordedRoles(client, rolesTable)).filter((role) => !role.made_here);
  if (strangers.length === 0) return [];
  const gone = strangers.filter((role) => !role.role_exists);
  if (gone.length > 0) {
    // A restore into another cluster without its roles (pg_dumpall --globals-only): the dump's grants to them
    // failed, so a new role would hold nothing. Said, rather than made empty.
    throw new MigrationError(
      `the outbox ${names.qualified}'s ${gone.map((role) => `${role.job} role ${JSON.stringify(role.role_name)}`).join(" and ")} ` +
        "does not exist in this cluster, and its grants were made for another database (a restore into another " +
        "cluster without its roles?). Nothing was changed: create the roles and restore the outbox's grants with " +
        "the dump (pg_dumpall --globals-only, then the database), and run the migrations again",
    );
  }
  const changes: RolesChange[] = [];
  const renewing = strangers.filter((role) => role.used_in.length > 0);
  if (renewing.length > 0) {
    // Policies need ACCESS EXCLUSIVE on their table: the outbox's strongest lock first (CONTRIBUTING.md).
    await client.query(`lock table ${names.qualified} in access exclusive mode`);
  }
  for (const role of strangers) {
    if (!renewing.includes(role)) {
      await recordAsMadeHere(client, rolesTable, role.job);
      changes.push({ job: role.job, role: role.role_name, action: "recorded" });
      continue;
    }
    const renewed = await freshRoleName(client, names, role.job);
    await createRole(client, renewed);
    await moveDependencies(client, role.role_name, renewed);
    await recordRenewed(client, rolesTable, role.job, renewed, role.role_name);
    changes.push({
      job: role.job,
      role: renewed,
      action: "renewed",
      previous: role.role_name,
      sharedWith: role.used_in,
    });
  }
  return changes;
}

async function moveDependencies(client: Queryable, old: string, renewed: string): Promise<void> {
  const dependencies = await roleDependencies(client, old, renewed);
  const unknown = dependencies.filter((dependency) => dependency.move === null);
  if (unknown.length > 0) {
    throw new MigrationError(
      `role ${JSON.stringify(old)} was made for another database, and this one's ${unknown
        .map((dependency) => dependency.object)
        .join(", ")} name${unknown.length === 1 ? "s" : ""} it in a way the migrations never do, so they ` +
        "cannot move it to a role of this database's own. Nothing was changed: remove or re-grant it by hand, " +
        "and run the migrations again",
    );
  }
  const before = await dependencyList(client, old);
  // One round trip each (the simple protocol runs a text of several statements in the caller's transaction):
  // a clone's roles have about 25 grants and policies to move, which the test harness moves for every file.
  const moves = dependencies.map((dependency) => dependency.move as string);
  const releases = dependencies.flatMap((dependency) =>
    dependency.release === null ? [] : [dependency.release],
  );
  try {
    if (moves.length > 0) await client.query(moves.join(";\n"));
    if (releases.length > 0) await client.query(releases.join(";\n"));
  } catch (error) {
    throw new MigrationError(
      `role ${JSON.stringify(old)} was made for another database, and moving its rights here to ` +
        `${JSON.stringify(renewed)} failed: ${(error as Error).message}. Nothing was changed: run the migrations as ` +
        "the owner of what it names, or a superuser",
      { cause: error },
    );
  }
  const given = await dependencyList(client, renewed);
  const left = await dependencyList(client, old);
  const missing = before.filter((dependency) => !given.includes(dependency));
  if (missing.length > 0 || left.length > 0) {
    throw new MigrationError(
      `role ${JSON.stringify(old)} was made for another database, and its rights here could not all move to ` +
        `${JSON.stringify(renewed)}: ${[...new Set([...missing, ...left])].map(describeDependency).join(", ")}. ` +
        `Postgres ignores a grant or revoke the running role may not make (${await currentUser(client)} ` +
        "holds no grant option there: the object's owner made the grant, e.g. the database's owner for schema " +
        "public on PostgreSQL 15+). Nothing was changed: run the migrations as that owner or a superuser, or " +
        "make the migration user the database's owner (`create database ... template ... owner <user>`)",
    );
  }
}

/** `a table public.outbox_events` as `the privileges on table public.outbox_events`. */
function describeDependency(dependency: string): string {
  const kind = { a: "privileges on", o: "ownership of", r: "" }[dependency[0] as "a" | "o" | "r"] ?? "";
  return `${kind} ${dependency.slice(2)}`.trim();
}

async function currentUser(client: Queryable): Promise<string> {
  const { rows } = await client.query<{ me: string }>("select current_user::text as me");
  return JSON.stringify(rows[0]?.me);
}

/** 0009's name for this database (`outbox_<job>:<database>.<schema>.<table>`, md5 past 63 bytes), made unique. */
async function freshRoleName(client: Queryable, names: OutboxNames, job: string): Promise<string> {
  const { rows } = await client.query<{ database: string }>(
    "select pg_catalog.current_database()::text as database",
  );
  const outbox = `${rows[0]?.database}.${names.schema}.${names.table}`;
  const suffix = randomBytes(4).toString("hex");
  const readable = `outbox_${job}:${outbox}:${suffix}`;
  if (Buffer.byteLength(readable) <= 63) return readable;
  return `outbox_${job}:${createHash("md5").update(outbox).digest("hex")}:${suffix}`;
}

/**
 * The relay's and the purge's check before they work on a database: refuses when the outbox's roles were made
 * for another database, whose logins then hold this one's rights (a clone or a restore not yet migrated).
 * One read of the roles table (0018 grants it to both roles). Before 0018 there is nothing to compare: passes.
 */
export async function checkRolesHere(db: Queryable, names: OutboxNames): Promise<void> {
  const rolesTable = names.related("roles");
  if (!(await recordsDatabase(db, rolesTable))) return;
  const strangers = (await recordedRoles(db, rolesTable)).filter((role) => !role.made_here);
  if (strangers.length === 0) return;
  throw new RolesElsewhereError(rolesElsewhereMessage(names, strangers));
}

function rolesElsewhereMessage(names: OutboxNames, strangers: RecordedRole[]): string {
  const roles = strangers.map((role) => JSON.stringify(role.role_name)).join(" and ");
  const madeFor = strangers[0]?.made_for;
  return (
    `the outbox ${names.qualified}'s roles ${roles} were made for ${madeFor === null || madeFor === undefined ? "another database" : `database ${JSON.stringify(madeFor)}`}, ` +
    "not this one (a database created from a template, or a restore under another name): that database's " +
    "logins hold this outbox's rights. Run `outbox migrate` on this database (the deploy's migrations do it): it " +
    "gives it roles of its own; then grant them to this database's relay and purge logins (docs/database.md, " +
    '"Cloned and restored databases")'
  );
}
