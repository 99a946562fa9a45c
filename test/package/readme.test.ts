import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { createEmptyDatabase } from "../support/db.ts";
import { appEnv, packedApp, REPOSITORY, typeCheckApp } from "../support/packedApp.ts";
import { createFifoQueue, receiveAll, sqsClient } from "../support/sqs.ts";

/**
 * The README as one story, from the packed tarball in a fresh app: its blocks named by their fence ("```ts
 * producer.ts") are the app's files as they are; they type-check together against the package's declarations and
 * `@types/aws-lambda` (the consumer is an `SQSHandler`), and run end to end against real Postgres and the SQS
 * endpoint: `npx outbox migrate` (and `--inbox`), the TypeScript migration runner, the producer's order and event,
 * `outbox relay --drain` publishing it to a FIFO queue, the consumer applying what the queue delivered once, and the
 * README's consumer test. Only the glue (the tables, receiving from the queue, calling the handler with what was
 * received) is this file's.
 */

const STORY = ["producer.ts", "migrate.ts", "billing.ts", "billing.test.ts"];

/** README's ts blocks whose fence names a file: the file's text. */
function namedBlocks(markdown: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const match of markdown.matchAll(/^```ts ([\w.-]+\.ts)\n([\s\S]*?)^```$/gm)) {
    files.set(match[1] ?? "", match[2] ?? "");
  }
  return files;
}

const readme = readFileSync(join(REPOSITORY, "README.md"), "utf8");
const scratch = realpathSync(mkdtempSync(join(tmpdir(), "outbox-readme-")));
let app: string;
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

beforeAll(() => {
  ({ app } = packedApp(scratch, {
    name: "orders-service",
    dependencies: ["pg"],
    devDependencies: ["typescript", "@types/node", "@types/pg", "@types/aws-lambda"],
  }));
  for (const [name, code] of namedBlocks(readme)) writeFileSync(join(app, name), code);
}, 300_000);

/** Runs `args` with the app's Node (this one: Node 24 strips the types of the README's .ts files). */
function run(args: string[], env: Record<string, string>) {
  const result = spawnSync(process.execPath, args, {
    cwd: app,
    encoding: "utf8",
    timeout: 120_000,
    env: appEnv(env),
  });
  expect(result.status, `node ${args.join(" ")}:\n${result.stdout}${result.stderr}`).toBe(0);
  return result.stdout;
}

describe("the README's story, from the packed tarball", () => {
  it("names its files: producer, migration runner, consumer and the consumer's test", () => {
    expect([...namedBlocks(readme).keys()]).toEqual(STORY);
    // The two one-liners a newcomer runs on a clone.
    expect(readme).toContain("`npm ci && npm start`");
    expect(readme).toContain("`npm ci && npm test`");
  });

  it("the producer writes the event type the consumer handles", () => {
    const blocks = namedBlocks(readme);
    const written = [...(blocks.get("producer.ts") ?? "").matchAll(/eventType: "([^"]+)"/g)].map((m) => m[1]);
    const handled = [...(blocks.get("billing.ts") ?? "").matchAll(/^ {4}"([^"]+)": async/gm)].map(
      (m) => m[1],
    );
    expect(written.length).toBeGreaterThan(0);
    expect(written.filter((type) => !handled.includes(type))).toEqual([]);
  });

  it("type-checks as one app (strict, nodenext) against the package and @types/aws-lambda", () => {
    writeFileSync(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "es2022",
          module: "nodenext",
          strict: true,
          noEmit: true,
          allowImportingTsExtensions: true,
          types: ["node"],
        },
        files: STORY,
      }),
    );
    const check = typeCheckApp(app);
    expect(check.status, `${check.stdout}${check.stderr}`).toBe(0);
  }, 120_000);

  it("runs end to end: migrate, place an order, relay it to SQS, consume it once, and the consumer's test", async () => {
    const database = await createEmptyDatabase();
    const sqs = sqsClient();
    try {
      const env = { DATABASE_URL: database.url };
      const outbox = join(app, "node_modules", "aws-outbox-relay", "dist", "cli", "outbox.js");
      // README, "Migrate": `npx outbox migrate`; "Consume": `outbox migrate --inbox`; then the runner in code.
      expect(readme).toMatch(/^npx outbox migrate$/m);
      run([outbox, "migrate"], env);
      run([outbox, "migrate", "--inbox"], env);
      expect(run(["migrate.ts"], env)).toMatch(/^applied 0 migrations$/m);
      const admin = new pg.Pool({ connectionString: database.url, max: 1 });
      try {
        await admin.query(
          "create table orders (id bigint generated always as identity primary key, customer text not null, total int not null)",
        );
        await admin.query("create table invoices (order_id text primary key, total int not null)");

        writeFileSync(
          join(app, "placeOrder.mjs"),
          `const { placeOrder } = await import("./producer.ts");\nawait placeOrder("c-1", 4200);\nprocess.exit(0);\n`,
        );
        run(["placeOrder.mjs"], env);
        const [order] = (await admin.query<{ id: string }>("select id::text from orders")).rows;
        expect(order).toBeDefined();

        const queueUrl = await createFifoQueue(sqs, "readme");
        const relay = run([outbox, "relay", "--drain", "--json"], {
          ...env,
          OUTBOX_QUEUE_URL: queueUrl,
          AWS_ENDPOINT_URL: inject("awsEndpoint"),
          AWS_REGION: LOCAL_AWS.region,
          AWS_ACCESS_KEY_ID: LOCAL_AWS.credentials.accessKeyId,
          AWS_SECRET_ACCESS_KEY: LOCAL_AWS.credentials.secretAccessKey,
        });
        expect(JSON.parse(relay)).toMatchObject({ published: 1, failed: 0 });
        const messages = await receiveAll(sqs, queueUrl, 1);
        expect(messages).toHaveLength(1);

        // The consumer gets what the queue delivered, as Lambda hands it over; twice, as at-least-once may.
        writeFileSync(join(app, "messages.json"), JSON.stringify(messages));
        writeFileSync(
          join(app, "consume.mjs"),
          `import { readFileSync } from "node:fs";
import { sqsEventOf, sqsRecordFromMessage } from "aws-outbox-relay/testing";
const { handler } = await import("./billing.ts");
const records = JSON.parse(readFileSync("messages.json", "utf8")).map((message) => sqsRecordFromMessage(message));
const first = await handler(sqsEventOf(...records), {}, () => {});
const again = await handler(sqsEventOf(...records), {}, () => {});
console.log("RESULT " + JSON.stringify({ first, again }));
process.exit(0);
`,
        );
        const consumed = run(["consume.mjs"], env);
        const line = consumed.split("\n").find((text) => text.startsWith("RESULT ")) ?? "RESULT null";
        expect(JSON.parse(line.slice("RESULT ".length))).toEqual({
          first: { batchItemFailures: [] },
          again: { batchItemFailures: [] },
        });
        expect((await admin.query("select order_id, total from invoices")).rows).toEqual([
          { order_id: order?.id, total: 4200 },
        ]);

        // README's consumer test, as a user runs it (node:assert throws on a failure).
        writeFileSync(join(app, "billingTest.mjs"), `await import("./billing.test.ts");\nprocess.exit(0);\n`);
        run(["billingTest.mjs"], env);
        expect(
          (await admin.query("select count(*)::int as n from invoices where order_id = '42'")).rows,
        ).toEqual([{ n: 1 }]);
      } finally {
        await admin.end();
      }
    } finally {
      sqs.destroy();
      await database.drop();
    }
  }, 300_000);
});
