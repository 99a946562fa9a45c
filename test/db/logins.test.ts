import { randomBytes } from "node:crypto";
import {
  CreateSecretCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from "@aws-sdk/client-secrets-manager";
import type { CloudFormationCustomResourceEvent } from "aws-lambda";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  createDatabasePool,
  type DatabasePool,
  databaseSourceFromEnv,
} from "../../functions/shared/db/connection.ts";
import { createLogins } from "../../functions/shared/db/logins.ts";
import { migrationsCustomResource } from "../../functions/shared/db/migrationsResource.ts";
import { DEFAULT_PURGE_OPTIONS, runPurge } from "../../functions/shared/purge/purge.ts";
import type { Logger } from "../../functions/shared/util/logger.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { drain as drainPool, testRelayOptions } from "../support/relay.ts";
import { quoteRole, uniqueRoleName } from "../support/roles.ts";
import { createFifoQueue, sqsClient } from "../support/sqs.ts";

/**
 * Issue 29, item 4: the relay and the purge run as logins of their own, which the migrations custom resource
 * creates from the secrets the stack generated (and a multi-user rotation later replaces with `<user>_clone`).
 * Real Postgres, the secrets in moto's Secrets Manager, the relay and the purge as they run in the Lambdas.
 */
const db = useTestDatabase();
const secrets = new SecretsManagerClient({ ...LOCAL_AWS, endpoint: inject("awsEndpoint") });
const sqs = sqsClient();
const suffix = randomBytes(4).toString("hex");
const relayUser = `relay_login_${suffix}`;
const purgeUser = `purge_login_${suffix}`;
const relayPassword = `relay-${randomBytes(12).toString("hex")}`;
const purgePassword = `purge-${randomBytes(12).toString("hex")}`;
const logged: string[] = [];
const logger: Logger = {
  info: (message, fields) => logged.push(message + JSON.stringify(fields)),
  warn: (message, fields) => logged.push(message + JSON.stringify(fields)),
  error: (message, fields) => logged.push(message + JSON.stringify(fields)),
};
const pools: DatabasePool[] = [];
let relayArn: string;
let purgeArn: string;
let queueUrl: string;

function secretValue(username: string, password: string): string {
  const url = new URL(db.directUrl);
  return JSON.stringify({
    engine: "postgres",
    host: url.hostname,
    port: Number(url.port),
    username,
    password,
    dbname: url.pathname.slice(1),
    masterarn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:master-AbCdEf",
  });
}

async function createSecret(name: string, value: string): Promise<string> {
  const { ARN } = await secrets.send(new CreateSecretCommand({ Name: name, SecretString: value }));
  if (ARN === undefined) throw new Error("no ARN");
  return ARN;
}

/** What CloudFormation sends the migrate Lambda, with the login secrets the construct passes. */
function event(requestType: "Create" | "Update"): CloudFormationCustomResourceEvent {
  return {
    RequestType: requestType,
    ServiceToken: "arn:aws:lambda:eu-west-1:123456789012:function:provider",
    ResponseURL: "https://example.invalid/response",
    StackId: "arn:aws:cloudformation:eu-west-1:123456789012:stack/Example/1",
    RequestId: `request-${requestType}`,
    LogicalResourceId: "OutboxMigrations",
    ResourceType: "Custom::OutboxMigrations",
    ResourceProperties: { ServiceToken: "x" },
    ...(requestType === "Create"
      ? {}
      : { PhysicalResourceId: "outbox-migrations:public.outbox_events", OldResourceProperties: {} }),
  } as CloudFormationCustomResourceEvent;
}

function runMigrations(requestType: "Create" | "Update") {
  // The master user: the harness's superuser, straight to the server (a login needs no pooler in between).
  const url = new URL(db.directUrl);
  url.searchParams.set("sslmode", "disable");
  return migrationsCustomResource(event(requestType), {
    source: databaseSourceFromEnv({ DATABASE_URL: url.toString() }),
    location: {},
    logger,
    logins: [
      { job: "relay", secretArn: relayArn },
      { job: "purge", secretArn: purgeArn },
    ],
    secrets,
  });
}

/** The relay as its Lambda runs it: on the pool createDatabasePool opened from the secret. */
function drain(pool: DatabasePool) {
  // drain() is typed for pg.Pool; runRelay, which it calls, takes any SessionPool.
  return drainPool(pool as unknown as pg.Pool, sqs, testRelayOptions(queueUrl));
}

async function processed(ids: string[]): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    "select count(*)::int as n from outbox_events where id = any($1::uuid[]) and processed_at is not null",
    [ids],
  );
  return rows[0]?.n ?? 0;
}

/** A pool as the relay or purge Lambda opens it from its DATABASE_SECRET_ARN (secret re-read at every checkout). */
async function poolOf(secretArn: string, applicationName: string): Promise<DatabasePool> {
  const source = databaseSourceFromEnv({
    DATABASE_SECRET_ARN: secretArn,
    DATABASE_SSLMODE: "disable",
    DATABASE_SECRET_TTL_SECONDS: "0",
  });
  const pool = await createDatabasePool(source, { max: 2, applicationName, secrets, authRetryMs: 5_000 });
  pools.push(pool);
  return pool;
}

async function sessionUsers(applicationName: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ usename: string }>(
    "select distinct usename from pg_stat_activity where application_name = $1 order by 1",
    [applicationName],
  );
  return rows.map((row) => row.usename);
}

beforeAll(async () => {
  relayArn = await createSecret(`outbox/logins/${relayUser}`, secretValue(relayUser, relayPassword));
  purgeArn = await createSecret(`outbox/logins/${purgeUser}`, secretValue(purgeUser, purgePassword));
  queueUrl = await createFifoQueue(sqs, "logins");
});

afterAll(async () => {
  for (const pool of pools) await pool.end();
  const admin = new pg.Client({ connectionString: inject("pgUrl") });
  await admin.connect();
  for (const user of [`${relayUser}_clone`, relayUser, `${purgeUser}_clone`, purgeUser]) {
    await admin.query(`drop role if exists ${quoteRole(user)}`);
  }
  await admin.end();
});

describe("the migrations custom resource creates the relay's and the purge's logins", () => {
  it("after migrating: each a login in its outbox role, from its secret, no password logged", async () => {
    await runMigrations("Create");

    const { rows } = await db.pool.query<{ rolname: string; rolcanlogin: boolean; member_of: string[] }>(
      `select r.rolname, r.rolcanlogin,
              array(select g.rolname from pg_auth_members m join pg_roles g on g.oid = m.roleid
                    where m.member = r.oid order by 1)::text[] as member_of
       from pg_roles r where r.rolname = any($1) order by 1`,
      [[relayUser, purgeUser]],
    );
    const { rows: recorded } = await db.pool.query<{ job: string; role_name: string }>(
      `select job, role_name from ${PRIVATE}.outbox_roles order by job`,
    );
    const roleOf = (job: string) => recorded.find((row) => row.job === job)?.role_name;
    expect(rows).toEqual([
      { rolname: purgeUser, rolcanlogin: true, member_of: [roleOf("purge")] },
      { rolname: relayUser, rolcanlogin: true, member_of: [roleOf("relay")] },
    ]);
    expect(logged.join("\n")).not.toContain(relayPassword);
    expect(logged.join("\n")).not.toContain(purgePassword);
  });

  it("the relay publishes and the purge deletes, each connected as its login", async () => {
    const ids = (await enqueueCommitted(db.pool, [anEvent(), anEvent(), anEvent()])).map((row) => row.id);
    const relayPool = await poolOf(relayArn, `relay-${suffix}`);
    await drain(relayPool);
    expect(await processed(ids)).toBe(3);
    expect(await sessionUsers(`relay-${suffix}`)).toEqual([relayUser]);

    await db.pool.query(
      "update outbox_events set processed_at = now() - interval '400 hours' where id = any($1::uuid[])",
      [ids],
    );
    const pending = (await enqueueCommitted(db.pool, [anEvent()])).map((row) => row.id);
    const purgePool = await poolOf(purgeArn, `purge-${suffix}`);
    const purged = await runPurge(
      { pool: purgePool, deadline: Date.now() + 60_000 },
      { ...DEFAULT_PURGE_OPTIONS, statementTimeoutMs: 2_000 },
    );
    expect(purged.stoppedBy).toBe("drained");
    expect(purged.deletedRows).toBeGreaterThanOrEqual(3);
    expect(await sessionUsers(`purge-${suffix}`)).toEqual([purgeUser]);
    const { rows } = await db.pool.query("select id from outbox_events where id = any($1::uuid[])", [
      [...ids, ...pending],
    ]);
    expect(rows.map((row) => row.id)).toEqual(pending);
  });

  it("the relay follows a multi-user rotation to <user>_clone, and a later deploy changes no password", async () => {
    const relayPool = await poolOf(relayArn, `rotated-${suffix}`);
    const first = (await enqueueCommitted(db.pool, [anEvent()])).map((row) => row.id);
    await drain(relayPool);
    expect(await processed(first)).toBe(1);

    // What the rotation function for PostgreSQL (multi-user) does with the master's credentials: setSecret
    // creates the clone `with login password ...` and grants it the current user, then finishSecret makes the
    // clone's credentials AWSCURRENT. The next rotation sets a new password on the original user.
    const clone = `${relayUser}_clone`;
    const clonePassword = `clone-${randomBytes(12).toString("hex")}`;
    await db.pool.query(`create role ${quoteRole(clone)} with login password '${clonePassword}'`);
    await db.pool.query(`grant ${quoteRole(relayUser)} to ${quoteRole(clone)}`);
    await secrets.send(
      new PutSecretValueCommand({ SecretId: relayArn, SecretString: secretValue(clone, clonePassword) }),
    );
    await db.pool.query(`alter role ${quoteRole(relayUser)} password 'the-next-rotation'`);

    const rotated = (await enqueueCommitted(db.pool, [anEvent(), anEvent()])).map((row) => row.id);
    await drain(relayPool);
    expect(await processed(rotated)).toBe(2);
    expect(await sessionUsers(`rotated-${suffix}`)).toContain(clone);

    // The next deploy's migrations find the clone in the secret: it exists, so its password is left alone.
    await runMigrations("Update");
    const later = (await enqueueCommitted(db.pool, [anEvent()])).map((row) => row.id);
    const fresh = await poolOf(relayArn, `after-deploy-${suffix}`);
    await drain(fresh);
    expect(await processed(later)).toBe(1);
    expect(await sessionUsers(`after-deploy-${suffix}`)).toEqual([clone]);
    expect(logged.join("\n")).not.toContain(clonePassword);
  });
});

describe("a login someone else created first (issue 39, finding 9)", () => {
  it("is refused, not granted the outbox's role, with an error naming it", async () => {
    await runMigrations("Create");
    const squatted = uniqueRoleName("outbox_relay");
    const arn = await createSecret(
      `outbox/logins/${squatted}`,
      secretValue(squatted, "the-deploy's-password"),
    );
    // What a CREATEROLE user could do before the first deploy: the name is derived from the construct's path.
    await db.pool.query(`create role ${quoteRole(squatted)} login password 'chosen-by-the-squatter'`);
    try {
      const error = await createLogins(db.pool, {}, [{ job: "relay", secretArn: arn }], {
        secrets,
        logger,
      }).catch((caught: unknown) => caught);

      expect(String(error)).toMatch(
        new RegExp(`login "${squatted}" .* exists but is not a member of "outbox_relay:`),
      );
      const { rows } = await db.pool.query(
        `select pg_has_role($1, (select role_name from ${PRIVATE}.outbox_roles where job = 'relay'), 'member') as member`,
        [squatted],
      );
      expect(rows[0]?.member).toBe(false);
    } finally {
      await db.pool.query(`drop role if exists ${quoteRole(squatted)}`);
    }
  });
});
