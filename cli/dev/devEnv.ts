/**
 * What the user's app needs to talk to `outbox dev`: the database, the endpoint, a region and credentials the
 * endpoint accepts, and the destinations' addresses. Printed as the banner and written to `.outbox/dev.env`
 * (`node --env-file=.outbox/dev.env app.ts`, Node 20.6+), rewritten on every start.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { LOCAL_AWS } from "./endpoint/localAws.ts";

export const DEV_ENV_FILE = "dev.env";

export function devEnvironment(options: {
  databaseUrl: string;
  awsEndpoint: string;
  addresses: Record<string, string>;
}): Record<string, string> {
  return {
    DATABASE_URL: options.databaseUrl,
    AWS_ENDPOINT_URL: options.awsEndpoint,
    AWS_REGION: LOCAL_AWS.region,
    AWS_ACCESS_KEY_ID: LOCAL_AWS.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: LOCAL_AWS.credentials.secretAccessKey,
    ...options.addresses,
  };
}

export async function writeDevEnv(dir: string, env: Record<string, string>): Promise<string> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, DEV_ENV_FILE);
  const lines = Object.entries(env).map(([name, value]) => `${name}=${quote(value)}`);
  await writeFile(path, `# written by outbox dev; rewritten on each start\n${lines.join("\n")}\n`, {
    mode: 0o600,
  });
  return path;
}

/** dotenv quoting as Node's --env-file reads it: plain when safe, else single quotes (JSON route tables). */
function quote(value: string): string {
  return /^[\w@%+=:,./?&-]*$/.test(value) ? value : `'${value}'`;
}
