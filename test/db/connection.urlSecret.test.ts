import { CreateSecretCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { afterAll, describe, expect, inject, it } from "vitest";
import { createDatabasePool, databaseSourceFromEnv } from "../../functions/shared/db/connection.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { useTestDatabase } from "../support/db.ts";

/**
 * DATABASE_SECRET_ARN may name a secret that holds a connection URL instead of the RDS JSON: what a service that
 * already keeps its DATABASE_URL in Secrets Manager has, so the construct can use that secret as it is.
 */
const db = useTestDatabase();
const secrets = new SecretsManagerClient({ ...LOCAL_AWS, endpoint: inject("awsEndpoint") });

async function secretHolding(value: string): Promise<string> {
  const { ARN } = await secrets.send(
    new CreateSecretCommand({ Name: `outbox/url/${Date.now()}-${Math.random()}`, SecretString: value }),
  );
  return ARN as string;
}

describe("database pool from a secret holding a postgres:// URL", () => {
  const pools: { end(): Promise<void> }[] = [];
  afterAll(async () => {
    for (const pool of pools) await pool.end();
  });

  it("connects as the URL's user, with a percent-encoded password, to the URL's database", async () => {
    const url = new URL(db.url);
    const role = `url_user_${Date.now()}`;
    await db.pool.query(`create role ${role} login password 'p@ss:w/rd'`);
    const arn = await secretHolding(
      `postgresql://${role}:${encodeURIComponent("p@ss:w/rd")}@${url.hostname}:${url.port}${url.pathname}?sslmode=require`,
    );
    const source = databaseSourceFromEnv({ DATABASE_SECRET_ARN: arn, DATABASE_SSLMODE: "disable" });
    const pool = await createDatabasePool(source, { max: 1, applicationName: "test", secrets });
    pools.push(pool);
    const client = await pool.connect();
    const { rows } = await client.query("select current_user as who, current_database() as db");
    client.release();
    expect(rows[0]).toEqual({ who: role, db: url.pathname.slice(1) });
  });

  it.each([
    ["postgres://:secret-password@db.example:5432/app", /holds a postgres:\/\/ URL without a username/],
    ["postgres://relay@db.example:5432/app", /holds a postgres:\/\/ URL without a password/],
    ["postgres://relay:secret-password@:5432/app", /does not parse|without a host/],
  ])("refuses %s with an error that names the secret and not the password", async (value, message) => {
    const arn = await secretHolding(value);
    const source = databaseSourceFromEnv({ DATABASE_SECRET_ARN: arn, DATABASE_SSLMODE: "disable" });
    const attempt = createDatabasePool(source, { max: 1, applicationName: "test", secrets });
    await expect(attempt).rejects.toThrow(message);
    await expect(attempt).rejects.toThrow(arn);
    await expect(attempt).rejects.not.toThrow(/secret-password/);
  });
});
