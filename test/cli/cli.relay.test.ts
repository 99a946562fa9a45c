import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { type FakeSqs, startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import { cliOf, finished } from "../support/cli.ts";
import { useTestDatabase } from "../support/db.ts";
import { createBusToQueue, eventBridgeClient } from "../support/eventBridge.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { createFifoQueue, receiveAll, sqsClient } from "../support/sqs.ts";

/** `outbox redrive`, `relay` and `purge`: what they change and publish (test/support/cli.ts runs them). */
const db = useTestDatabase();
const sqs = sqsClient();
const { startCli, outbox, insertDeadLetter, rowState } = cliOf(db);

beforeEach(async () => {
  await db.pool.query("truncate outbox_events");
});

describe("outbox redrive", () => {
  it("refuses to run without a selector, or with an id that is not a UUID, and changes nothing", async () => {
    const id = await insertDeadLetter({});

    const bare = await outbox(["redrive"]);
    const badId = await outbox(["redrive", "--id", "42"]);
    const conflicting = await outbox(["redrive", "--all", "--event-type", "order.created"]);

    expect(bare.code).toBe(2);
    expect(bare.stderr).toMatch(/say which dead letters to redrive: --id/);
    expect(badId.code).toBe(2);
    expect(badId.stderr).toMatch(/"42" is not an outbox id/);
    expect(conflicting.code).toBe(2);
    expect((await rowState(id)).dead_lettered_at).toBeInstanceOf(Date);
  });

  it("--dry-run shows what would change and changes nothing", async () => {
    const id = await insertDeadLetter({});

    const run = await outbox(["redrive", "--all", "--dry-run"]);

    expect(run.code).toBe(0);
    expect(run.stdout).toContain(id);
    expect(run.stdout).toMatch(/would redrive 1 dead letter\(s\); nothing changed \(dry run\)/);
    expect(await rowState(id)).toMatchObject({ attempts: 10, processed_at: null });
    expect((await rowState(id)).dead_lettered_at).toBeInstanceOf(Date);
  });

  it("returns the selected dead letters to pending: attempts 0, available now, last error kept with a note", async () => {
    const chosen = await insertDeadLetter({ aggregateId: "order-a" });
    const other = await insertDeadLetter({ aggregateId: "order-b" });
    const sameType = await insertDeadLetter({ eventType: "order.refunded", aggregateId: "order-c" });

    const byId = await outbox(["redrive", "--id", chosen, "--json"]);
    const byType = await outbox(["redrive", "--event-type", "order.refunded"]);

    expect(byId.code).toBe(0);
    expect(JSON.parse(byId.stdout)).toMatchObject({ dryRun: false, redriven: 1, events: [{ id: chosen }] });
    expect(await rowState(chosen)).toMatchObject({ attempts: 0, dead_lettered_at: null, available: true });
    expect((await rowState(chosen)).last_error).toMatch(
      /^redriven at \S+Z after 10 attempts; last error: SQS rejected the message/,
    );
    expect((await rowState(other)).dead_lettered_at).toBeInstanceOf(Date);
    expect(byType.stdout).toMatch(/redrove 1 dead letter/);
    expect((await rowState(sameType)).dead_lettered_at).toBeNull();
  });

  it("warns when a redriven event is older than already-published events of its aggregate", async () => {
    const dead = await insertDeadLetter({ aggregateId: "order-x" });
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, processed_at)
       values ('order', 'order-x', 'order.updated', '{}', now())`,
    );

    const run = await outbox(["redrive", "--id", dead]);

    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/later event of this group already published/);
    expect(run.stdout).toMatch(
      /warning: 1 of them are older than events of the same message group.*group\(s\): order-x/,
    );
  });

  it("--dry-run names the groups a redrive would overtake, after the purge deleted the successor", async () => {
    const dead = await insertDeadLetter({ aggregateId: "order-y" });
    // A Shipment of the same id: same group. Published a month ago and purged since.
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, processed_at)
       values ('shipment', 'order-y', 'shipment.sent', '{}', now() - interval '30 days')`,
    );
    const purge = await outbox(["purge"]);
    expect(purge.code).toBe(0);

    const run = await outbox(["redrive", "--id", dead, "--dry-run", "--json"]);

    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ dryRun: true, overtakenGroups: ["order-y"] });
    expect((await rowState(dead)).dead_lettered_at).toBeInstanceOf(Date);
  });

  it("gets a redriven dead letter published by `outbox relay --drain`", async () => {
    const queueUrl = await createFifoQueue(sqs, "cli-redrive");
    const id = await insertDeadLetter({ aggregateId: "order-redriven" });

    const redrive = await outbox(["redrive", "--id", id]);
    const relay = await outbox(["relay", "--drain", "--json"], {
      OUTBOX_QUEUE_URL: queueUrl,
      AWS_ENDPOINT_URL: inject("awsEndpoint"),
    });

    expect(redrive.code).toBe(0);
    expect(relay.code).toBe(0);
    expect(JSON.parse(relay.stdout)).toMatchObject({ published: 1, failed: 0, stoppedBy: "drained" });
    const messages = await receiveAll(sqs, queueUrl, 1);
    expect(messages.map((message) => message.MessageAttributes?.outboxId?.StringValue)).toEqual([id]);
    expect((await rowState(id)).processed_at).toBeInstanceOf(Date);
  });
});

describe("outbox relay", () => {
  it("refuses a malformed queue URL, and a queue that does not exist, before relaying", async () => {
    const endpoint = inject("awsEndpoint");
    const malformed = await outbox(["relay", "--drain", "--queue-url", "orders.fifo"]);
    const missing = await outbox(["relay", "--drain", "--endpoint-url", endpoint], {
      OUTBOX_QUEUE_URL: `${endpoint}/123456789012/no-such-queue.fifo`,
    });

    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toMatch(
      /--queue-url \/ OUTBOX_QUEUE_URL must be a queue URL like https:\/\/sqs\./,
    );
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/queue .*no-such-queue\.fifo does not exist/);
  });

  it("refuses to relay, exit 2, when the order key ran backwards (a restored sequence), and publishes nothing", async () => {
    const queueUrl = await createFifoQueue(sqs, "cli-order-key");
    const env = { OUTBOX_QUEUE_URL: queueUrl, AWS_ENDPOINT_URL: inject("awsEndpoint") };
    await enqueueCommitted(db.pool, [anEvent(), anEvent(), anEvent()]);
    expect((await outbox(["relay", "--drain"], env)).code).toBe(0);
    const { rows } = await db.pool.query<{ seq: string }>("select max(seq)::text as seq from outbox_events");
    await db.pool.query("select setval('outbox_events_seq_seq', 1)");
    const row = await enqueueCommitted(db.pool, anEvent({ aggregateId: "order-after-restore" }));
    try {
      const relay = await outbox(["relay", "--drain"], env);

      expect(relay.code).toBe(2);
      expect(relay.stderr).toMatch(
        /the order key ran backwards: sequence public\.outbox_events_seq_seq would hand out seq \d+ next, not above seq \d+, the highest/,
      );
      expect((await rowState(row.id)).processed_at).toBeNull();
    } finally {
      await db.pool.query("delete from outbox_events where id = $1", [row.id]);
      await db.pool.query("select setval('outbox_events_seq_seq', $1::bigint)", [rows[0]?.seq]);
    }
  });

  describe("on SIGTERM", () => {
    let fake: FakeSqs;
    beforeAll(async () => {
      fake = await startFakeSqs();
    });
    afterAll(async () => {
      await fake.close();
    });

    it("finishes and records the round in progress, leaves no row locked, and exits 0", async () => {
      const queueUrl = await createFifoQueue(sqsClient(fake.url), "cli-sigterm");
      const ids = (await enqueueCommitted(db.pool, [anEvent(), anEvent(), anEvent()])).map((row) => row.id);
      let publishing: () => void = () => {};
      const publishInFlight = new Promise<void>((resolve) => {
        publishing = resolve;
      });
      // Hold the relay's first publish for a while, and tell the test it is in flight: SIGTERM lands mid-round.
      fake.setFaults({
        latencyMs: (action) => {
          if (action !== "SendMessageBatch") return 0;
          publishing();
          return 1_000;
        },
      });

      const relay = startCli(["relay", "--endpoint-url", fake.url, "--log-format", "json", "--json"], {
        OUTBOX_QUEUE_URL: queueUrl,
      });
      const done = finished(relay);
      await publishInFlight;
      relay.kill("SIGTERM");
      const run = await done;

      expect(run.code).toBe(0);
      expect(JSON.parse(run.stdout)).toMatchObject({ published: 3, failed: 0, stoppedBy: "signal" });
      expect(run.stderr).toMatch(
        /"message":"stopping: no new rounds; the round in progress finishes and records"/,
      );
      const { rows } = await db.pool.query(
        "select count(*)::int as published from outbox_events where id = any($1::uuid[]) and processed_at is not null",
        [ids],
      );
      expect(rows[0].published).toBe(3);
      const locked = await db.pool.query("select id from outbox_events for update nowait");
      expect(locked.rowCount).toBe(3);
    });
  });
});

describe("outbox purge", () => {
  it("deletes published rows older than the retention and keeps recent and pending ones", async () => {
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, processed_at)
       select 'order', 'old-' || g, 'order.created', '{}', now() - interval '10 days', now() - interval '9 days'
       from generate_series(1, 5) as g`,
    );
    await db.pool.query(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, processed_at)
       values ('order', 'recent-1', 'order.created', '{}', now() - interval '1 hour')`,
    );
    await enqueueCommitted(db.pool, anEvent());

    const run = await outbox(["purge", "--retention-hours", "24", "--json"]);

    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({
      deletedRows: 5,
      deletedDeadLetters: 0,
      stoppedBy: "drained",
    });
    const { rows } = await db.pool.query(
      "select count(*)::int as left, count(*) filter (where processed_at is null)::int as pending from outbox_events",
    );
    expect(rows[0]).toEqual({ left: 2, pending: 1 });
  });
});

describe("outbox relay --event-bus", () => {
  it("publishes to an EventBridge bus, read back through a rule and a queue", async () => {
    const events = eventBridgeClient();
    const { busName, queueUrl } = await createBusToQueue(events, sqs, "com.example.cli", "cli-bus");
    events.destroy();
    await db.pool.query("delete from outbox_events where processed_at is null");
    const [event] = await enqueueCommitted(db.pool, [anEvent({ aggregateId: "order-on-the-bus" })]);

    const relay = await outbox(
      ["relay", "--drain", "--json", "--event-bus", busName, "--event-source", "com.example.cli"],
      { AWS_ENDPOINT_URL: inject("awsEndpoint"), RELAY_PUBLISH_TIMEOUT_MS: "30000" },
    );

    expect(relay.stderr).not.toMatch(/error/i);
    expect(JSON.parse(relay.stdout)).toMatchObject({ published: 1, failed: 0, stoppedBy: "drained" });
    const [message] = await receiveAll(sqs, queueUrl, 1);
    expect(JSON.parse(message?.Body ?? "{}")).toMatchObject({
      source: "com.example.cli",
      detail: { outboxId: event?.id, aggregateId: "order-on-the-bus" },
    });
  });

  it("takes OUTBOX_ROUTES alone as its destination (the queue is then an optional default)", async () => {
    const queueUrl = await createFifoQueue(sqs, "cli-routes");
    await db.pool.query("delete from outbox_events where processed_at is null");
    const [event] = await enqueueCommitted(db.pool, [anEvent({ aggregateId: "order-routed" })]);
    const routes = [{ match: {}, destination: { kind: "sqs-fifo", queueUrl } }];

    const relay = await outbox(["relay", "--drain", "--json"], {
      AWS_ENDPOINT_URL: inject("awsEndpoint"),
      OUTBOX_ROUTES: JSON.stringify(routes),
    });

    expect(relay.stderr).not.toMatch(/no destination/);
    expect(JSON.parse(relay.stdout)).toMatchObject({ published: 1, failed: 0, stoppedBy: "drained" });
    const [message] = await receiveAll(sqs, queueUrl, 1);
    expect(message?.MessageAttributes?.outboxId?.StringValue).toBe(event?.id);
  });

  it("refuses an --invocation-seconds that cannot fit a round with the claim check's load allowance", async () => {
    // 40 s fits a plain round (25 s); with OUTBOX_PAYLOAD_BUCKET a round reserves 40 s more, so before this check
    // every invocation ended at once and the process started the next one, forever.
    const run = await outbox(["relay", "--invocation-seconds", "40"], {
      OUTBOX_QUEUE_URL: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo",
      OUTBOX_PAYLOAD_BUCKET: "orders-payloads",
    });

    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(
      /an invocation of 40000 ms cannot fit one round, which reserves \d+ ms .*claim check/,
    );
  });

  it("holds --invocation-seconds to the Lambda's own rule: a round's reserve plus RELAY_BUDGET_MARGIN_MS", async () => {
    // A round reserves 35 s here (20 s publish + 3 x 5 s statement timeouts); with a 1 s margin a Lambda accepts a
    // 36 s timeout, while the command used to refuse anything under reserve + 5 s.
    const queueUrl = await createFifoQueue(sqs, "cli-short");
    await db.pool.query("delete from outbox_events where processed_at is null");
    const [event] = await enqueueCommitted(db.pool, [anEvent({ aggregateId: "order-short" })]);
    const env = {
      AWS_ENDPOINT_URL: inject("awsEndpoint"),
      OUTBOX_QUEUE_URL: queueUrl,
      RELAY_PUBLISH_TIMEOUT_MS: "20000",
      RELAY_BUDGET_MARGIN_MS: "1000",
    };

    const short = await outbox(["relay", "--drain", "--json", "--invocation-seconds", "37"], env);
    const tooShort = await outbox(["relay", "--drain", "--invocation-seconds", "35"], env);

    expect(short.stderr).not.toMatch(/error/i);
    expect(JSON.parse(short.stdout)).toMatchObject({ published: 1, stoppedBy: "drained" });
    const [message] = await receiveAll(sqs, queueUrl, 1);
    expect(message?.MessageAttributes?.outboxId?.StringValue).toBe(event?.id);
    expect(tooShort.code).not.toBe(0);
    expect(tooShort.stderr).toMatch(
      /an invocation of 35000 ms cannot fit one round, which reserves 36000 ms/,
    );
  });

  it("refuses a queue and a bus at once, and neither, naming both settings", async () => {
    const both = await outbox(["relay", "--drain", "--event-bus", "orders"], {
      OUTBOX_QUEUE_URL: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo",
    });
    const neither = await outbox(["relay", "--drain"]);

    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/OUTBOX_QUEUE_URL and OUTBOX_EVENT_BUS_NAME are both set/);
    expect(neither.code).toBe(2);
    expect(neither.stderr).toMatch(
      /no destination: pass --queue-url .* or --event-bus .*, or set OUTBOX_ROUTES/,
    );
  });
});
