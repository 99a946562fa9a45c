import { type ChildProcess, spawn } from "node:child_process";
import type { StartedLocalStackContainer } from "@testcontainers/localstack";
import { chooseFromEnvironment, containerFailed, containerImages } from "./docker.ts";
import { freePort } from "./freePort.ts";

export interface LocalAwsEndpoint {
  /** Base URL for the AWS SDK's `endpoint` (SQS, EventBridge, SNS, Kinesis). */
  url: string;
  source: "env" | "localstack" | "moto";
  stop(): Promise<void>;
}

/** Credentials and region the emulators accept; never real ones (the same as `outbox dev`'s). */
export { LOCAL_AWS } from "../../cli/dev/localAws.ts";

/**
 * Finds an SQS/EventBridge endpoint: `envUrl` if given; else LocalStack through testcontainers when Docker
 * answers; else a moto server started here on a free port (python3 with moto[server]). local/backends/docker.ts has the
 * choice, `OUTBOX_LOCAL_BACKEND` and the pinned image; a LocalStack that fails to start is an error, not moto.
 */
export async function startAwsEndpoint(envUrl?: string): Promise<LocalAwsEndpoint> {
  if (envUrl !== undefined && envUrl !== "") {
    return { url: envUrl, source: "env", stop: async () => {} };
  }
  if ((await chooseFromEnvironment()) === "docker") return startLocalStack();
  return startMoto();
}

async function startLocalStack(): Promise<LocalAwsEndpoint> {
  const image = containerImages().localstack;
  const { LocalstackContainer } = await import("@testcontainers/localstack");
  let container: StartedLocalStackContainer;
  try {
    container = await new LocalstackContainer(image)
      .withEnvironment({
        SERVICES: "sqs,events,sns,kinesis,s3",
        // LocalStack 3+ builds queue URLs on its own port 4566, which is not the port Docker mapped on this host;
        // `dynamic` builds them from the request's Host header, so the queue URLs it returns can be called.
        SQS_ENDPOINT_STRATEGY: "dynamic",
      })
      .start();
  } catch (error) {
    throw containerFailed("LocalStack", image, error);
  }
  return {
    url: container.getConnectionUri(),
    source: "localstack",
    stop: async () => void (await container.stop()),
  };
}

async function startMoto(): Promise<LocalAwsEndpoint> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn("python3", ["-m", "moto.server", "-H", "127.0.0.1", "-p", String(port)], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<never>((_, reject) => {
    child.once("error", (error) => reject(noEndpoint(`python3 could not be started: ${error.message}`)));
    child.once("exit", (code) =>
      reject(noEndpoint(`moto server exited with code ${code}: ${stderr.trim()}`)),
    );
  });
  await Promise.race([waitForHttp(url, 30_000), exited]);
  exited.catch(() => {});
  return { url, source: "moto", stop: () => stopChild(child) };
}

function noEndpoint(reason: string): Error {
  return new Error(
    `No SQS endpoint: ${reason}. Set TEST_AWS_ENDPOINT_URL to a running LocalStack or moto server, start a ` +
      "Docker engine (LocalStack via testcontainers), or install moto (`pip install 'moto[server]'`).",
  );
}

/** Polls until the server answers HTTP; readiness probing, bounded by `timeoutMs`. */
async function waitForHttp(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await fetch(`${url}/moto-api/`, { signal: AbortSignal.timeout(1000) });
      return;
    } catch {
      if (Date.now() > deadline) throw noEndpoint(`nothing answered at ${url} within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
  });
}
