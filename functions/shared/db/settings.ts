import { choiceSetting, integerSetting, textSetting } from "../util/settings.ts";

/**
 * The Lambda Node.js runtimes (20 and later) ship every Amazon root CA, RDS's included, in this file but no
 * longer load it at start (it slowed cold starts). We read it for the database connection only.
 */
export const LAMBDA_CA_BUNDLE = "/var/runtime/ca-cert.pem";

/**
 * Where the database credentials come from, for every entry point (databaseSourceFromEnv in connection.ts has
 * the rules): a URL, or a Secrets Manager secret in the RDS format with its options. Exactly one of the two.
 */
export const DATABASE_SETTINGS = {
  url: textSetting({
    env: "DATABASE_URL",
    default: undefined,
    doc: "postgres://user:password@host:5432/db (local runs, tests, CLI); or DATABASE_SECRET_ARN, not both",
  }),
  secretArn: textSetting({
    env: "DATABASE_SECRET_ARN",
    default: undefined,
    doc: "Secrets Manager secret in the RDS format (deployed Lambdas); or DATABASE_URL, not both",
  }),
  name: textSetting({
    env: "DATABASE_NAME",
    default: undefined,
    doc: "with a secret: the database; unset: the secret's dbname, else postgres",
  }),
  sslmode: choiceSetting({
    env: "DATABASE_SSLMODE",
    default: "verify-full",
    choices: ["verify-full", "disable"],
    doc: "with a secret: disable only for a local server without TLS",
  }),
  caFile: textSetting({
    env: "DATABASE_CA_FILE",
    default: LAMBDA_CA_BUNDLE,
    doc: "CA bundle the server's certificate is verified against (RDS's is in the Lambda runtime's)",
  }),
  // Rotation is followed within this long even while the old host still answers (connection.ts, SecretPool).
  secretTtlSeconds: integerSetting({
    env: "DATABASE_SECRET_TTL_SECONDS",
    default: 900,
    min: 0,
    max: 86_400,
    doc: "how long the secret is cached before it is read again",
  }),
} as const;

/**
 * The logins the migrate Lambda makes after migrating (logins.ts): one secret per job, written by the construct
 * when it generates them. Unset: no login is made (the relay and purge use a secret the operator manages).
 */
export const LOGIN_SETTINGS = {
  relaySecretArn: textSetting({
    env: "OUTBOX_RELAY_LOGIN_SECRET_ARN",
    default: undefined,
    doc: "secret (RDS format) of the relay's login, created in the outbox's relay role after the migrations",
  }),
  purgeSecretArn: textSetting({
    env: "OUTBOX_PURGE_LOGIN_SECRET_ARN",
    default: undefined,
    doc: "secret (RDS format) of the purge's login, created in the outbox's purge role after the migrations",
  }),
} as const;
