import { CreateSecretCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import type { CloudFormationCustomResourceUpdateEvent } from "aws-lambda";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { databaseSourceFromEnv } from "../../functions/shared/db/connection.ts";
import { migrate } from "../../functions/shared/db/migrate.ts";
import { migrationsCustomResource } from "../../functions/shared/db/migrationsResource.ts";
import { RolesElsewhereError } from "../../functions/shared/db/rolesHere.ts";
import { withTransaction } from "../../functions/shared/db/session.ts";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { DEFAULT_PURGE_OPTIONS, runPurge } from "../../functions/shared/purge/purge.ts";
import { relayInvocation } from "../../functions/shared/relay/invocation.ts";
import { relayConfigFromEnv } from "../../functions/shared/relay/settings.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { cloneDatabase, createEmptyDatabase, type ScratchDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { relayLambdaEnv } from "../support/lambda.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { queueDestination } from "../support/relay.ts";
import { outboxRoles, quoteRole, uniqueRoleName } from "../support/roles.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

/**
 * Issue 39, finding 6: `create database b template a` copies a's outbox with the grants and policies that name
 * a's relay and purge roles, which belong to the whole cluster: a's relay login read b's payloads and marked b's
 * pending events published. After `outbox migrate` on b (the runner, rolesHere.ts), b has roles of its own, a's
 * logins have nothing in b, and until then the relay and the purge refuse b.
 */
const aws = useFakeSqs();
const quiet = { info() {}, warn() {}, error() {} };
const databases: ScratchDatabase[] = [];
const logins: string[] = [];
const pools: pg.Pool[] = [];
let original: ScratchDatabase;
let originalRoles: { relay: string; purge: string };
/** A's relay login: what A's relay Lambda connects as. */
let originalRelayLogin: string;
/** What CloudFormation sends the migrate Lambda on an update. */
const deployEvent = {
  RequestType: "Update",
  ServiceToken: "arn:aws:lambda:eu-west-1:123456789012:function:provider",
  ResponseURL: "https://example.invalid/response",
  StackId: "arn:aws:cloudformation:eu-west-1:123456789012:stack/Example/1",
  RequestId: "request-update",
  LogicalResourceId: "OutboxMigrations",
  ResourceType: "Custom::OutboxMigrations",
  PhysicalResourceId: "outbox-migrations:public.outbox_events",
  ResourceProperties: { ServiceToken: "arn:aws:lambda:eu-west-1:123456789012:function:provider" },
  OldResourceProperties: {},
} as CloudFormationCustomResourceUpdateEvent;

function poolOf(url: string, user?: string): pg.Pool {
  const parsed = new URL(url);
  if (user !== undefined) {
    parsed.username = user;
    parsed.password = "login-password";
  }
  const pool = new pg.Pool({ connectionString: parsed.toString(), max: 2 });
  pool.on("error", () => {});
  pools.push(pool);
  return pool;
}

/** Work on this file's template, with every session closed afterwards: it must have none to be cloned. */
async function onTemplate(user: string | undefined, work: (pool: pg.Pool) => Promise<unknown>) {
  const pool = poolOf(original.url, user);
  try {
    await work(pool);
  } finally {
    pools.splice(pools.indexOf(pool), 1);
    await pool.end();
  }
}

async function createLogin(admin: pg.Pool, role: string): Promise<string> {
  const login = uniqueRoleName("clone_test_login");
  await admin.query(`create role ${login} login password 'login-password' in role ${quoteRole(role)}`);
  logins.push(login);
  return login;
}

/** A migrated database of its own (the template of this file's clones), closed so it can be cloned. */
async function migratedDatabase(): Promise<ScratchDatabase> {
  const database = await createEmptyDatabase();
  databases.push(database);
  const pool = new pg.Pool({ connectionString: database.url, max: 2 });
  try {
    await migrate(pool);
  } finally {
    await pool.end();
  }
  return database;
}

async function clone(
  template: ScratchDatabase,
  owner?: string,
): Promise<{ database: ScratchDatabase; admin: pg.Pool }> {
  const database = await cloneDatabase(template.name, owner);
  databases.push(database);
  return { database, admin: poolOf(database.url) };
}

async function pendingEvent(admin: pg.Pool): Promise<string> {
  const [event] = await withTransaction(admin, (client) => enqueue(client, [anEvent()]));
  return event?.id as string;
}

/** Every object of this database that names `role`: grants, policies, ownership, default privileges. */
async function dependencies(admin: pg.Pool, role: string): Promise<string[]> {
  const { rows } = await admin.query<{ dependency: string }>(
    `select s.deptype::text || ' ' || pg_describe_object(s.classid, s.objid, s.objsubid) as dependency
     from pg_shdepend as s
     where s.dbid = (select oid from pg_database where datname = current_database())
       and s.refclassid = 'pg_authid'::regclass and s.refobjid = (select oid from pg_roles where rolname = $1)
     order by 1`,
    [role],
  );
  return rows.map((row) => row.dependency);
}

function invokeRelay(pool: pg.Pool, url: string, queueUrl: string) {
  const config = relayConfigFromEnv(
    relayLambdaEnv({
      DATABASE_URL: url,
      OUTBOX_QUEUE_URL: queueUrl,
      AWS_ENDPOINT_URL: aws.fake.url,
      RELAY_MODE: "drain",
    }),
  );
  return relayInvocation(
    {
      pool,
      destination: queueDestination(aws.sqs, { queueUrl }),
      deadline: Date.now() + 10_000,
      logger: quiet,
    },
    config,
  );
}

beforeAll(async () => {
  original = await migratedDatabase();
  const admin = poolOf(original.url);
  originalRoles = await outboxRoles(admin);
  originalRelayLogin = await createLogin(admin, originalRoles.relay);
  // What an operator might have added for the relay's role, beyond the migrations' grants: it must move too.
  await admin.query(
    `alter default privileges in schema public grant select on tables to ${quoteRole(originalRoles.relay)}`,
  );
  await admin.query("create table relay_notes (note text)");
  await admin.query(`alter table relay_notes owner to ${quoteRole(originalRoles.relay)}`);
  await admin.end();
  pools.splice(pools.indexOf(admin), 1);
});

afterAll(async () => {
  for (const pool of pools) await pool.end();
  for (const database of databases.reverse()) await database.drop();
  const admin = new pg.Client({ connectionString: inject("pgUrl") });
  await admin.connect();
  for (const login of logins) await admin.query(`drop role if exists ${login}`);
  await admin.end();
});

describe("a database created from a template", () => {
  it("is refused by the relay and the purge until `outbox migrate` gives it roles of its own", async () => {
    const { database, admin } = await clone(original);
    await pendingEvent(admin);
    const queueUrl = await createFifoQueue(aws.sqs, "clone-refused");

    const refused = invokeRelay(admin, database.url, queueUrl);
    await expect(refused).rejects.toThrow(RolesElsewhereError);
    await expect(refused).rejects.toThrow(
      new RegExp(`made for database "${original.name}", not this one.*Run \`outbox migrate\``),
    );
    const purged = await runPurge(
      { pool: admin, deadline: Date.now() + 10_000 },
      { ...DEFAULT_PURGE_OPTIONS, statementTimeoutMs: 2_000, retentionHours: 1 },
    );
    expect(purged).toMatchObject({ stoppedBy: "error", error: expect.stringMatching(/outbox migrate/) });
    expect(aws.fake.deliveries(queueUrl.split("/").at(-1))).toEqual([]);

    await migrate(admin);

    expect(await invokeRelay(admin, database.url, queueUrl)).toMatchObject({ published: 1 });
  });

  it("after `outbox migrate`, keeps the template's relay login out: permission denied reading or marking", async () => {
    const { database, admin } = await clone(original);
    const id = await pendingEvent(admin);

    const result = await migrate(admin);

    const intruder = poolOf(database.url, originalRelayLogin);
    await expect(intruder.query("select payload from outbox_events")).rejects.toThrow(/permission denied/);
    await expect(
      intruder.query("update outbox_events set processed_at = now() where id = $1", [id]),
    ).rejects.toThrow(/permission denied/);
    const { rows } = await admin.query("select processed_at from outbox_events where id = $1", [id]);
    expect(rows).toEqual([{ processed_at: null }]);
    const renewed = await outboxRoles(admin);
    expect(result.roles).toEqual([
      {
        job: "purge",
        role: renewed.purge,
        action: "renewed",
        previous: originalRoles.purge,
        sharedWith: [original.name],
      },
      {
        job: "relay",
        role: renewed.relay,
        action: "renewed",
        previous: originalRoles.relay,
        sharedWith: [original.name],
      },
    ]);
    expect(renewed.relay).toMatch(
      new RegExp(`^outbox_relay:(${database.name}\\.public\\.outbox_events|[0-9a-f]{32}):[0-9a-f]{8}$`),
    );
    expect(await dependencies(admin, originalRoles.relay)).toEqual([]);
    expect(await dependencies(admin, originalRoles.purge)).toEqual([]);

    // The clone's own relay login, in the clone's new role, publishes its event.
    const queueUrl = await createFifoQueue(aws.sqs, "clone-own-login");
    const ownLogin = await createLogin(admin, renewed.relay);
    const own = poolOf(database.url, ownLogin);
    expect(await invokeRelay(own, database.url, queueUrl)).toMatchObject({ published: 1, failedRounds: 0 });
    expect(aws.fake.deliveries(queueUrl.split("/").at(-1))).toHaveLength(1);

    // The template keeps its roles, and its login its rights there; running the migrations again changes nothing.
    await onTemplate(undefined, async (originalAdmin) => {
      expect((await migrate(originalAdmin)).roles).toBeUndefined();
      expect(await outboxRoles(originalAdmin)).toEqual(originalRoles);
    });
    await onTemplate(originalRelayLogin, (login) =>
      expect(login.query("select count(*) from outbox_events")).resolves.toBeDefined(),
    );
    expect((await migrate(admin)).roles).toBeUndefined();
  });

  it("moves every grant, default privilege, policy and ownership of the old roles to the new ones", async () => {
    const { admin } = await clone(original);
    const before = {
      relay: await dependencies(admin, originalRoles.relay),
      purge: await dependencies(admin, originalRoles.purge),
    };
    expect(before.relay).toEqual(
      expect.arrayContaining([
        "a default privileges on new relations belonging to role " +
          `${(await admin.query("select current_user")).rows[0].current_user} in schema public`,
        "o table relay_notes",
        "r policy relay_updates_pending_rows on table outbox_events",
      ]),
    );

    await migrate(admin);

    const renewed = await outboxRoles(admin);
    expect(renewed.relay).not.toBe(originalRoles.relay);
    expect(renewed.purge).not.toBe(originalRoles.purge);
    expect(await dependencies(admin, renewed.relay)).toEqual(before.relay);
    expect(await dependencies(admin, renewed.purge)).toEqual(before.purge);
    const { rows } = await admin.query<{ policy: string; roles: string[] }>(
      `select polname as policy, array(select rolname::text from pg_roles where oid = any(polroles) order by 1) as roles
       from pg_policy where polrelid = 'outbox_events'::regclass and polname like 'purge%' order by 1`,
    );
    expect(rows).toEqual([
      { policy: "purge_deletes_settled_rows", roles: [renewed.purge] },
      { policy: "purge_locks_settled_rows", roles: [renewed.purge] },
    ]);
  });
});

describe("a migration user that is not a superuser (CREATEROLE, as the RDS master user)", () => {
  it("renews a clone it owns; refuses, naming it, a grant it may not move, and changes nothing", async () => {
    const migrator = uniqueRoleName("clone_test_migrator");
    const superuser = new pg.Client({ connectionString: inject("pgUrl") });
    await superuser.connect();
    await superuser.query(`create role ${migrator} login createrole password 'login-password'`);
    logins.push(migrator);
    const template = await createEmptyDatabase();
    databases.push(template);
    await superuser.query(`alter database ${template.name} owner to ${migrator}`);
    await superuser.end();
    const templatePool = poolOf(template.url, migrator);
    await migrate(templatePool);
    const roles = await outboxRoles(templatePool);
    pools.splice(pools.indexOf(templatePool), 1);
    await templatePool.end();
    const { database: owned, admin: ownedAdmin } = await clone(template, migrator);
    const before = await dependencies(ownedAdmin, roles.relay);

    const result = await migrate(poolOf(owned.url, migrator));

    expect(result.roles?.map((change) => change.action)).toEqual(["renewed", "renewed"]);
    const renewed = await outboxRoles(ownedAdmin);
    expect(await dependencies(ownedAdmin, renewed.relay)).toEqual(before);
    expect(await dependencies(ownedAdmin, roles.relay)).toEqual([]);
    expect(await dependencies(ownedAdmin, roles.purge)).toEqual([]);

    // A grant the migration user did not make and may not move: refused, naming it, and nothing changed.
    const { database, admin } = await clone(template, migrator);
    await admin.query("create table superuser_notes (note text)");
    await admin.query(`grant select on superuser_notes to ${quoteRole(roles.relay)}`);
    await expect(migrate(poolOf(database.url, migrator))).rejects.toThrow(/superuser_notes/);
    expect(await outboxRoles(admin)).toEqual(roles);
  });
});

describe("the deploy's migrations on a clone", () => {
  it("renew its roles, grant them to its own logins, and say so in the log", async () => {
    // The clone's stack made its relay login while the clone still shared the template's roles (before 0018).
    const { database, admin } = await clone(original);
    const login = await createLogin(admin, originalRoles.relay);
    const secrets = new SecretsManagerClient({ ...LOCAL_AWS, endpoint: inject("awsEndpoint") });
    const { ARN } = await secrets.send(
      new CreateSecretCommand({
        Name: `clone-relay-${login}`,
        SecretString: JSON.stringify({ username: login, password: "login-password" }),
      }),
    );
    const logged: string[] = [];
    const logger = {
      info: (message: string, fields?: object) => logged.push(message + JSON.stringify(fields)),
      warn: (message: string, fields?: object) => logged.push(message + JSON.stringify(fields)),
      error: (message: string, fields?: object) => logged.push(message + JSON.stringify(fields)),
    };
    const url = new URL(database.url);
    url.searchParams.set("sslmode", "disable");

    await migrationsCustomResource(deployEvent, {
      source: databaseSourceFromEnv({ DATABASE_URL: url.toString() }),
      location: {},
      logger,
      logins: [{ job: "relay", secretArn: ARN as string }],
      secrets,
    });
    secrets.destroy();

    const renewed = await outboxRoles(admin);
    expect(renewed.relay).not.toBe(originalRoles.relay);
    expect(logged.join("\n")).toContain(
      `outbox roles renewed{"job":"relay","role":${JSON.stringify(renewed.relay)}`,
    );
    await pendingEvent(admin);
    const queueUrl = await createFifoQueue(aws.sqs, "clone-deploy");
    expect(await invokeRelay(poolOf(database.url, login), database.url, queueUrl)).toMatchObject({
      published: 1,
      failedRounds: 0,
    });
  });
});

describe("a database whose recorded roles do not exist (restored into another cluster without them)", () => {
  it("is refused by the migrations, naming the role, with nothing changed", async () => {
    const { admin } = await clone(original);
    await admin.query(
      `update ${PRIVATE}.outbox_roles set role_name = 'outbox_relay:nowhere.public.outbox_events' where job = 'relay'`,
    );

    await expect(migrate(admin)).rejects.toThrow(
      /relay role "outbox_relay:nowhere\.public\.outbox_events" does not exist in this cluster/,
    );
    expect((await outboxRoles(admin)).purge).toBe(originalRoles.purge);
  });
});

describe("a database whose template is gone", () => {
  it("keeps its roles, recorded as its own: the logins it inherited go on working", async () => {
    const template = await migratedDatabase();
    const templateAdmin = poolOf(template.url);
    const roles = await outboxRoles(templateAdmin);
    const login = await createLogin(templateAdmin, roles.relay);
    await templateAdmin.end();
    pools.splice(pools.indexOf(templateAdmin), 1);
    const { database, admin } = await clone(template);
    await template.drop();
    databases.splice(databases.indexOf(template), 1);

    const result = await migrate(admin);

    expect(result.roles).toEqual([
      { job: "purge", role: roles.purge, action: "recorded" },
      { job: "relay", role: roles.relay, action: "recorded" },
    ]);
    await pendingEvent(admin);
    const queueUrl = await createFifoQueue(aws.sqs, "clone-recorded");
    expect(await invokeRelay(poolOf(database.url, login), database.url, queueUrl)).toMatchObject({
      published: 1,
    });
  });
});
