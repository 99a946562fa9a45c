import type { Queryable } from "../session.ts";

/**
 * Which database an outbox's roles were made for (migration 0018), and what they have in this database. Roles
 * belong to the cluster; pg_shdepend is the cluster's own record of which database's objects name a role (its
 * grants, policies, ownerships, default privileges: `dbid`, PostgreSQL docs, "pg_shdepend"), copied to a clone by
 * CREATE DATABASE with the objects. So it answers both questions exactly: who else uses this role, and what must
 * move before this database stops naming it. Every name is bound or built by the server's format() (%I quotes
 * an identifier; regclass and regprocedure print qualified, quoted names).
 */

export interface RecordedRole {
  job: "relay" | "purge";
  role_name: string;
  /** Whether the roles table records this database's OID (false: another's, or none yet). */
  made_here: boolean;
  /** The database the role was recorded for, when it still exists. */
  made_for: string | null;
  role_exists: boolean;
  /** Other databases of the cluster whose objects name the role. */
  used_in: string[];
}

const THIS_DATABASE =
  "(select d.oid from pg_catalog.pg_database as d where d.datname = pg_catalog.current_database())";

/** The recorded roles of an outbox (its roles table, `rolesTable`, quoted) as seen from this database. */
export async function recordedRoles(db: Queryable, rolesTable: string): Promise<RecordedRole[]> {
  const { rows } = await db.query<RecordedRole>(
    `select r.job, r.role_name,
            coalesce(r.database_oid = ${THIS_DATABASE}, false) as made_here,
            (select d.datname::text from pg_catalog.pg_database as d where d.oid = r.database_oid) as made_for,
            ro.oid is not null as role_exists,
            array(select distinct d.datname::text from pg_catalog.pg_shdepend as s
                  join pg_catalog.pg_database as d on d.oid = s.dbid
                  where s.refclassid = 'pg_catalog.pg_authid'::regclass and s.refobjid = ro.oid
                    and s.dbid <> ${THIS_DATABASE}
                  order by 1) as used_in
     from ${rolesTable} as r
     left join pg_catalog.pg_roles as ro on ro.rolname = r.role_name
     order by r.job`,
  );
  return rows;
}

/** Whether the roles table has 0018's column: the runner's step waits for the migration that adds it. */
export async function recordsDatabase(db: Queryable, rolesTable: string): Promise<boolean> {
  const { rows } = await db.query<{ recorded: boolean }>(
    `select exists (select from pg_catalog.pg_attribute
                    where attrelid = pg_catalog.to_regclass($1) and attname = 'database_oid' and not attisdropped)
       as recorded`,
    [rolesTable],
  );
  return rows[0]?.recorded === true;
}

/** This database's roles are the recorded ones, as they are: 0018's column set to this database. */
export async function recordAsMadeHere(db: Queryable, rolesTable: string, job: string): Promise<void> {
  await db.query(`update ${rolesTable} set database_oid = ${THIS_DATABASE} where job = $1`, [job]);
}

export async function recordRenewed(
  db: Queryable,
  rolesTable: string,
  job: string,
  role: string,
  previous: string,
): Promise<void> {
  await db.query(
    `update ${rolesTable} set role_name = $2, previous_role_name = $3, database_oid = ${THIS_DATABASE}
     where job = $1`,
    [job, role, previous],
  );
}

export async function createRole(db: Queryable, role: string): Promise<void> {
  const { rows } = await db.query<{ statement: string }>(
    "select format('create role %I nologin', $1::text) as statement",
    [role],
  );
  await db.query(rows[0]?.statement ?? "");
}

/** What `old` has in this database and the statements that give it to `renewed` and take it from `old`. */
export interface RoleDependency {
  /** pg_describe_object's text: "table public.outbox_events", "policy any_role on table ...". */
  object: string;
  /** Undefined: a kind of dependency the runner does not know how to move (it refuses, naming it). */
  move: string | null;
  /** Undefined when the move replaces it (a policy's role list, an owner). */
  release: string | null;
}

/**
 * Every dependency of role $1 in this database, with the statements that move it to role $2. Privileges
 * (aclexplode: one row per privilege, `with grant option` kept) on relations, their columns (pg_shdepend's
 * objsubid is the column's number), routines, schemas and types, and default privileges; row-security policies
 * (their role list, with $1 replaced); ownership. Anything else (a large object, a foreign server, default
 * privileges *for* the role) comes back with `move` null.
 */
export async function roleDependencies(
  db: Queryable,
  old: string,
  renewed: string,
): Promise<RoleDependency[]> {
  const { rows } = await db.query<RoleDependency>(
    `with old as (select r.oid from pg_catalog.pg_roles as r where r.rolname = $1),
     dep as (
       select s.classid, s.objid, s.objsubid, s.deptype from pg_catalog.pg_shdepend as s
       where s.dbid = ${THIS_DATABASE} and s.refclassid = 'pg_catalog.pg_authid'::regclass
         and s.refobjid = (select oid from old)),
     privilege as (
       select d.classid, d.objid, d.objsubid, a.privilege_type, a.is_grantable,
              case d.classid
                when 'pg_catalog.pg_class'::regclass then
                  (select case c.relkind when 'S' then 'sequence ' else 'table ' end || c.oid::regclass::text
                   from pg_catalog.pg_class as c where c.oid = d.objid)
                when 'pg_catalog.pg_proc'::regclass then 'routine ' || d.objid::regprocedure::text
                when 'pg_catalog.pg_namespace'::regclass then
                  'schema ' || (select pg_catalog.quote_ident(n.nspname) from pg_catalog.pg_namespace as n
                                where n.oid = d.objid)
                when 'pg_catalog.pg_type'::regclass then 'type ' || pg_catalog.format_type(d.objid, null)
              end as target,
              (select pg_catalog.quote_ident(a2.attname) from pg_catalog.pg_attribute as a2
               where d.classid = 'pg_catalog.pg_class'::regclass and a2.attrelid = d.objid
                 and a2.attnum = d.objsubid and d.objsubid > 0) as column_name
       from dep as d
       cross join lateral pg_catalog.aclexplode(case d.classid
         when 'pg_catalog.pg_class'::regclass then
           case when d.objsubid = 0 then (select c.relacl from pg_catalog.pg_class as c where c.oid = d.objid)
                else (select a2.attacl from pg_catalog.pg_attribute as a2
                      where a2.attrelid = d.objid and a2.attnum = d.objsubid) end
         when 'pg_catalog.pg_proc'::regclass then (select p.proacl from pg_catalog.pg_proc as p where p.oid = d.objid)
         when 'pg_catalog.pg_namespace'::regclass then
           (select n.nspacl from pg_catalog.pg_namespace as n where n.oid = d.objid)
         when 'pg_catalog.pg_type'::regclass then (select t.typacl from pg_catalog.pg_type as t where t.oid = d.objid)
       end) as a
       where d.deptype = 'a' and a.grantee = (select oid from old))
     select pg_catalog.pg_describe_object(p.classid, p.objid, p.objsubid) as object,
            format('grant %s%s on %s to %I%s', p.privilege_type,
                   coalesce(' (' || p.column_name || ')', ''), p.target, $2::text,
                   case when p.is_grantable then ' with grant option' else '' end) as move,
            format('revoke %s%s on %s from %I', p.privilege_type,
                   coalesce(' (' || p.column_name || ')', ''), p.target, $1::text) as release
     from privilege as p
     union all
     select pg_catalog.pg_describe_object(d.classid, d.objid, 0),
            format('alter default privileges for role %I%s grant %s on %s to %I',
                   pg_catalog.pg_get_userbyid(da.defaclrole),
                   case when da.defaclnamespace = 0 then ''
                        else ' in schema ' || pg_catalog.quote_ident(n.nspname) end,
                   a.privilege_type, k.kind, $2::text),
            format('alter default privileges for role %I%s revoke %s on %s from %I',
                   pg_catalog.pg_get_userbyid(da.defaclrole),
                   case when da.defaclnamespace = 0 then ''
                        else ' in schema ' || pg_catalog.quote_ident(n.nspname) end,
                   a.privilege_type, k.kind, $1::text)
     from dep as d
     join pg_catalog.pg_default_acl as da on d.classid = 'pg_catalog.pg_default_acl'::regclass and da.oid = d.objid
     left join pg_catalog.pg_namespace as n on n.oid = da.defaclnamespace
     cross join lateral (select case da.defaclobjtype when 'r' then 'tables' when 'S' then 'sequences'
                                  when 'f' then 'functions' when 'T' then 'types' when 'n' then 'schemas' end
                         as kind) as k
     cross join lateral pg_catalog.aclexplode(da.defaclacl) as a
     where d.deptype = 'a' and a.grantee = (select oid from old)
     union all
     select pg_catalog.pg_describe_object(d.classid, d.objid, 0),
            format('alter policy %I on %s to %s', p.polname, p.polrelid::regclass,
                   (select string_agg(case when r.role = 0 then 'public'
                                           when r.role = (select oid from old) then pg_catalog.quote_ident($2)
                                           else pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(r.role)) end,
                                      ', ' order by r.n)
                    from unnest(p.polroles) with ordinality as r(role, n))),
            null
     from dep as d
     join pg_catalog.pg_policy as p on d.classid = 'pg_catalog.pg_policy'::regclass and p.oid = d.objid
     where d.deptype = 'r'
     union all
     select pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid),
            case d.classid
              when 'pg_catalog.pg_class'::regclass then format('alter table %s owner to %I', d.objid::regclass, $2::text)
              when 'pg_catalog.pg_proc'::regclass then
                format('alter routine %s owner to %I', d.objid::regprocedure, $2::text)
              when 'pg_catalog.pg_namespace'::regclass then
                format('alter schema %I owner to %I',
                       (select n.nspname from pg_catalog.pg_namespace as n where n.oid = d.objid), $2::text)
              when 'pg_catalog.pg_type'::regclass then
                format('alter type %s owner to %I', pg_catalog.format_type(d.objid, null), $2::text)
            end,
            null
     from dep as d
     where d.deptype = 'o'
     union all
     select pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid), null, null
     from dep as d
     where not (d.deptype = 'a' and d.classid in ('pg_catalog.pg_class'::regclass, 'pg_catalog.pg_proc'::regclass,
                                                 'pg_catalog.pg_namespace'::regclass, 'pg_catalog.pg_type'::regclass,
                                                 'pg_catalog.pg_default_acl'::regclass))
       and not (d.deptype = 'r' and d.classid = 'pg_catalog.pg_policy'::regclass)
       and not (d.deptype = 'o' and d.classid in ('pg_catalog.pg_class'::regclass, 'pg_catalog.pg_proc'::regclass,
                                                 'pg_catalog.pg_namespace'::regclass, 'pg_catalog.pg_type'::regclass))`,
    [old, renewed],
  );
  return rows;
}

/**
 * What of role $1 this database names (pg_shdepend), each as `<deptype> <object>` (a: a privilege, o: ownership,
 * r: a policy), sorted: what a renewal must find on the new role exactly as it was on the old, and no longer on
 * the old. A GRANT or REVOKE the running role may not make does not fail, it warns and changes nothing, so the
 * catalog is what says whether it happened.
 */
export async function dependencyList(db: Queryable, role: string): Promise<string[]> {
  const { rows } = await db.query<{ dependency: string }>(
    `select s.deptype::text || ' ' || pg_catalog.pg_describe_object(s.classid, s.objid, s.objsubid) as dependency
     from pg_catalog.pg_shdepend as s
     where s.dbid = ${THIS_DATABASE} and s.refclassid = 'pg_catalog.pg_authid'::regclass
       and s.refobjid = (select r.oid from pg_catalog.pg_roles as r where r.rolname = $1)
     order by 1`,
    [role],
  );
  return rows.map((row) => row.dependency);
}
