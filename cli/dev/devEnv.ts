/**
 * What the user's app needs to talk to `outbox dev`: the database, the endpoint, a region and credentials the
 * endpoint accepts, and the destinations' addresses. Printed as the banner and written to `.outbox/dev.env`
 * (`node --env-file=.outbox/dev.env app.ts`, Node 20.6+), rewritten on every start.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { OutboxLimits } from "../../functions/shared/outbox/limits.ts";
import type { LocalTarget } from "./destinations.ts";
import { LOCAL_AWS } from "./localAws.ts";

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

/** Every target's addresses; a name given by several (a route table's queues) gets `_2`, `_3`, ... */
export function addressesOf(targets: LocalTarget[]): Record<string, string> {
  const addresses: Record<string, string> = {};
  for (const target of targets) {
    for (const [name, value] of Object.entries(target.addresses)) {
      let key = name;
      for (let n = 2; key in addresses; n++) key = `${name}_${n}`;
      addresses[key] = value;
    }
  }
  return addresses;
}

/** What `outbox dev` says on start: what runs where, and the environment for the app. */
export function banner(parts: {
  source: string;
  aws: string;
  envFile: string;
  env: Record<string, string>;
  targets: LocalTarget[];
  consumer: string | undefined;
  applied: string[];
  limits: OutboxLimits;
}): string[] {
  const lines = [
    `outbox dev: database ${parts.source}${parts.applied.length > 0 ? ` (${parts.applied.length} migration(s) applied)` : ""}; AWS ${parts.aws}`,
    ...parts.targets.map((target) => `  ${target.resources}`),
    `  enqueue refuses messages over ${parts.limits.maxMessageBytes} bytes (${parts.limits.limitedBy ?? "the default"}); ` +
      `larger payloads, up to ${parts.limits.maxPayloadBytes}, go through the claim check's bucket`,
    `  relay: dwell mode; consumer: ${parts.consumer ?? "none (--consumer ./handler.ts to run yours)"}`,
    `Run your app with these (written to ${parts.envFile}; node --env-file=${parts.envFile} ...):`,
    ...Object.entries(parts.env).map(([name, value]) => `  ${name}=${value}`),
  ];
  return lines;
}
