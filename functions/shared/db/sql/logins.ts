import type { Queryable } from "../session.ts";

/**
 * The statements that make a login for one of the outbox's jobs. Role names and passwords are not parameters
 * Postgres accepts in CREATE ROLE or GRANT, so the server builds each statement with format(): %I quotes an
 * identifier, %L a literal (the password), both as quote_ident / quote_literal would. The text returned is never
 * logged: it holds the password.
 */

/**
 * The role the migration recorded for this job (0009, `<prefix>_roles`), whether the login exists yet, and whether
 * it is a member of that role: directly (what createLoginStatement made it, in the same implicit transaction) or
 * through the login it rotates (the multi-user rotation's `<user>_clone` is granted `<user>`), or of the role a
 * renewal replaced (0018's previous_role_name: a cloned database's logins, made by this deploy before the runner
 * gave the clone roles of its own, db/rolesHere.ts).
 */
export async function loginState(
  db: Queryable,
  rolesTable: string,
  job: "relay" | "purge",
  username: string,
): Promise<{ outboxRole: string | undefined; exists: boolean; member: boolean }> {
  const { rows } = await db.query<{ outbox_role: string | null; login_exists: boolean; member: boolean }>(
    `with outbox_role as (select role_name, previous_role_name from ${rolesTable} where job = $1),
     ours as (select r.rolname from pg_catalog.pg_roles as r
              where r.rolname in (select role_name from outbox_role union all select previous_role_name from outbox_role))
     select (select role_name from outbox_role) as outbox_role,
            exists (select from pg_catalog.pg_roles where rolname = $2) as login_exists,
            case when exists (select from pg_catalog.pg_roles where rolname = $2)
                 then exists (select from ours where pg_catalog.pg_has_role($2, ours.rolname, 'MEMBER'))
                 else false end as member`,
    [job, username],
  );
  return {
    outboxRole: rows[0]?.outbox_role ?? undefined,
    exists: rows[0]?.login_exists === true,
    member: rows[0]?.member === true,
  };
}

/**
 * CREATE ROLE ... LOGIN, and the grant of the outbox role to it, as one text for one simple-protocol round trip.
 * The grant goes to the login itself: the multi-user rotation's clone is created `GRANT <login> TO <clone>`,
 * so it holds the outbox role's privileges through the login. INHERIT (the default) is what makes them apply
 * without SET ROLE.
 */
export async function createLoginStatement(
  db: Queryable,
  username: string,
  password: string,
  outboxRole: string,
): Promise<string> {
  const { rows } = await db.query<{ statement: string }>(
    `select format('create role %I with login inherit password %L; grant %I to %I', $1::text, $2::text,
                   $3::text, $1::text) as statement`,
    [username, password, outboxRole],
  );
  return rows[0]?.statement ?? "";
}

/** For a login that exists (a later deploy, or its rotation's clone): the grant alone, never a new password. */
export async function grantStatement(db: Queryable, username: string, outboxRole: string): Promise<string> {
  const { rows } = await db.query<{ statement: string }>(
    "select format('grant %I to %I', $1::text, $2::text) as statement",
    [outboxRole, username],
  );
  return rows[0]?.statement ?? "";
}
