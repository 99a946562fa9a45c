import type { Queryable } from "../../functions/shared/db/session.ts";

/**
 * A deterministic text description of one schema, from the catalogs (no pg_dump binary needed): columns,
 * constraints, indexes, storage options, views, functions, triggers, row security and its policies, and the
 * privileges granted on the schema's objects to anyone but their owner (PUBLIC's default EXECUTE on functions
 * included, so a definer function left open to everyone shows).
 */
export async function dumpSchema(db: Queryable, schema = "public"): Promise<string> {
  const sections: [string, string, unknown[]][] = [
    [
      "columns",
      `select c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
              || case when a.attnotnull then ' not null' else '' end
              || case when a.attidentity = 'a' then ' generated always as identity' else '' end
              || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '') as line
       from pg_attribute a
       join pg_class c on c.oid = a.attrelid
       join pg_namespace n on n.oid = c.relnamespace
       left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
       where n.nspname = $1 and c.relkind in ('r', 'v') and a.attnum > 0 and not a.attisdropped
       order by c.relname, a.attnum`,
      [schema],
    ],
    [
      "constraints",
      `select c.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid) as line
       from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_namespace n on n.oid = c.relnamespace
       where n.nspname = $1 order by 1`,
      [schema],
    ],
    ["indexes", "select indexdef as line from pg_indexes where schemaname = $1 order by indexname", [schema]],
    [
      "storage",
      `select c.relname || ' ' || array_to_string(c.reloptions, ', ') as line
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where n.nspname = $1 and c.reloptions is not null order by 1`,
      [schema],
    ],
    [
      "views",
      `select c.relname || ': ' || regexp_replace(pg_get_viewdef(c.oid, true), '\\s+', ' ', 'g') as line
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where n.nspname = $1 and c.relkind = 'v' order by 1`,
      [schema],
    ],
    [
      "functions",
      `select pg_get_functiondef(p.oid) as line from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname = $1 order by p.proname`,
      [schema],
    ],
    [
      "triggers",
      `select pg_get_triggerdef(t.oid) as line from pg_trigger t
       join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace
       where n.nspname = $1 and not t.tgisinternal order by t.tgname`,
      [schema],
    ],
    [
      "row security",
      `select c.relname || case when c.relforcerowsecurity then ' forced' else ' enabled' end as line
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where n.nspname = $1 and c.relrowsecurity order by 1`,
      [schema],
    ],
    [
      "policies",
      `select tablename || ' ' || policyname || ' ' || permissive || ' for ' || cmd || ' to ' || array_to_string(roles, ', ')
              || coalesce(' using ' || qual, '') || coalesce(' with check ' || with_check, '') as line
       from pg_policies where schemaname = $1 order by tablename, policyname`,
      [schema],
    ],
    [
      "privileges",
      `select kind || ' ' || object || ' to ' || grantee || ': ' || string_agg(privilege, ', ' order by privilege) as line
       from (
         select case c.relkind when 'S' then 'sequence' when 'v' then 'view' else 'table' end as kind,
                c.relname::text as object, a.grantee, a.privilege_type as privilege, c.relowner as owner
         from pg_class c join pg_namespace n on n.oid = c.relnamespace, aclexplode(c.relacl) a
         where n.nspname = $1
         union all
         select 'column', c.relname || '.' || t.attname, a.grantee, a.privilege_type, c.relowner
         from pg_attribute t join pg_class c on c.oid = t.attrelid join pg_namespace n on n.oid = c.relnamespace,
              aclexplode(t.attacl) a
         where n.nspname = $1 and t.attacl is not null
         union all
         select 'function', p.oid::regprocedure::text, a.grantee, a.privilege_type, p.proowner
         from pg_proc p join pg_namespace n on n.oid = p.pronamespace,
              aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
         where n.nspname = $1
       ) as granted(kind, object, grantee_oid, privilege, owner)
       cross join lateral (select coalesce((select rolname from pg_roles where oid = grantee_oid), 'PUBLIC')) as g(grantee)
       where grantee_oid <> owner
       group by kind, object, grantee order by kind, object, grantee`,
      [schema],
    ],
  ];
  // Postgres 14 and 15 print a view's columns qualified with their table (`outbox_events.id`); 16 and later
  // leave out a qualifier that one table in scope makes needless. The dump is the same on every major the
  // package supports (the version matrix compares it too), so the qualifiers of the schema's tables go.
  const { rows: tables } = await db.query<{ name: string }>(
    `select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = $1 and c.relkind = 'r'`,
    [schema],
  );
  const unqualify = (line: string) =>
    tables.reduce((text, { name }) => text.replaceAll(new RegExp(`\\b${name}\\.(?=\\w)`, "g"), ""), line);
  const out: string[] = [];
  for (const [title, sql, values] of sections) {
    const { rows } = await db.query<{ line: string }>(sql, values);
    const lines = rows.map((row) => row.line.trimEnd());
    out.push(`-- ${title}`, ...(title === "views" ? lines.map(unqualify) : lines), "");
  }
  return out.join("\n");
}
