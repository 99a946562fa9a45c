import { createHash, createHmac, pbkdf2Sync, randomBytes } from "node:crypto";
import { GetSecretValueCommand, type SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { ConfigError } from "../outbox/errors.ts";
import { type OutboxLocation, outboxNames } from "../outbox/names.ts";
import type { Env } from "../util/env.ts";
import type { Logger } from "../util/logger.ts";
import { readText } from "../util/settings.ts";
import type { SessionPool } from "./session.ts";
import { LOGIN_SETTINGS } from "./settings.ts";
import { createLoginStatement, grantStatement, loginState } from "./sql/logins.ts";

/** A login the stack generated for one of the outbox's jobs: its Secrets Manager secret (RDS format). */
export interface OutboxLogin {
  job: "relay" | "purge";
  secretArn: string;
}

/** The logins the construct asked the migrate Lambda for (LOGIN_SETTINGS), checked at its cold start. */
export function loginsFromEnv(env: Env): OutboxLogin[] {
  const logins: OutboxLogin[] = [];
  for (const [job, setting] of [
    ["relay", LOGIN_SETTINGS.relaySecretArn],
    ["purge", LOGIN_SETTINGS.purgeSecretArn],
  ] as const) {
    const secretArn = readText(env, setting);
    if (secretArn === undefined) continue;
    if (!secretArn.startsWith("arn:"))
      throw new ConfigError(`${setting.env} must be a Secrets Manager secret ARN`);
    logins.push({ job, secretArn });
  }
  return logins;
}

/**
 * Makes each job's login from its secret, after the migrations (which create the outbox's NOLOGIN roles and
 * record them in `<prefix>_roles`): `create role <username> login password ...` when no such role exists, then
 * `grant <outbox role> to <username>`, in one implicit transaction. A login that exists keeps its password: after
 * the first deploy the secret belongs to its rotation, whose AWSCURRENT may be `<username>_clone` with a password
 * only it set. One that exists but is not already a member of its outbox role was not made here: refused.
 * Runs as the migrations' user (the master user: it created the outbox roles, so it may grant them).
 */
export async function createLogins(
  pool: SessionPool,
  location: OutboxLocation,
  logins: readonly OutboxLogin[],
  deps: { secrets: SecretsManagerClient; logger: Logger },
): Promise<void> {
  const rolesTable = outboxNames(location).related("roles");
  for (const login of logins) {
    const { username, password } = await loginSecret(deps.secrets, login.secretArn);
    const client = await pool.connect();
    try {
      const { outboxRole, exists, member } = await loginState(client, rolesTable, login.job, username);
      if (outboxRole === undefined) {
        throw new Error(`no ${login.job} role recorded in ${rolesTable}: migration 0009 has not run here`);
      }
      if (exists && !member) {
        // The names are derived from the construct's path, so anyone with CREATEROLE can make one first, as a
        // login with a password of their own: granting it the outbox's role would hand them the job's rights.
        throw new ConfigError(
          `login ${JSON.stringify(username)} (${login.secretArn}) exists but is not a member of ${JSON.stringify(outboxRole)}: ` +
            "the deploy creates its logins and grants them their role together, so this one was made by someone " +
            "else and is not adopted. Find out who created it, drop it (drop role ...), and deploy again",
        );
      }
      // The statement text holds the password (as a SCRAM verifier): it is run, never logged.
      const statement = exists
        ? await grantStatement(client, username, outboxRole)
        : await createLoginStatement(client, username, scramVerifier(password), outboxRole);
      await client.query(statement);
      deps.logger.info(exists ? "login exists, granted its outbox role" : "login created", {
        job: login.job,
        username,
        outboxRole,
        secretArn: login.secretArn,
      });
    } finally {
      client.release();
    }
  }
}

async function loginSecret(
  secrets: SecretsManagerClient,
  secretArn: string,
): Promise<{ username: string; password: string }> {
  const { SecretString } = await secrets.send(new GetSecretValueCommand({ SecretId: secretArn }));
  let value: { username?: unknown; password?: unknown };
  try {
    value = JSON.parse(SecretString ?? "");
  } catch {
    throw new ConfigError(`login secret ${secretArn} is not JSON (expected the RDS secret format)`);
  }
  if (typeof value.username !== "string" || value.username === "") {
    throw new ConfigError(`login secret ${secretArn} has no "username"`);
  }
  if (typeof value.password !== "string" || value.password === "") {
    throw new ConfigError(`login secret ${secretArn} has no "password"`);
  }
  return { username: value.username, password: value.password };
}

/**
 * The password as Postgres stores it (SCRAM-SHA-256, RFC 5802 / 7677, 4096 iterations as Postgres's default), so
 * the clear text never reaches the server, where `log_statement = 'ddl'` would write it to the log. Postgres
 * takes a verifier in CREATE ROLE ... PASSWORD as it is, and it authenticates both `scram-sha-256` and `md5`
 * pg_hba methods. A password with non-ASCII characters (SASLprep would normalise it) is sent as it is; the
 * generated ones are ASCII.
 */
export function scramVerifier(password: string, salt: Buffer = randomBytes(16), iterations = 4096): string {
  // Printable ASCII is the range SASLprep leaves alone.
  if (!/^[\x20-\x7e]*$/.test(password)) return password;
  const salted = pbkdf2Sync(password, salt, iterations, 32, "sha256");
  const clientKey = createHmac("sha256", salted).update("Client Key").digest();
  const storedKey = createHash("sha256").update(clientKey).digest();
  const serverKey = createHmac("sha256", salted).update("Server Key").digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString("base64")}$${storedKey.toString("base64")}:${serverKey.toString("base64")}`;
}
