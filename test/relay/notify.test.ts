import { describe, expect, it } from "vitest";
import { type RoundReport, runRelay } from "../../functions/shared/relay/engine.ts";
import { listenForOutboxInserts } from "../../functions/shared/relay/wakeUp.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { queueDestination, testRelayOptions } from "../support/relay.ts";
import { createFifoQueue, sqsClient } from "../support/sqs.ts";

const db = useTestDatabase();
const sqs = sqsClient();

describe("LISTEN/NOTIFY wake-up (opt-in)", () => {
  it("is installed disabled, so producers pay no NOTIFY commit lock by default", async () => {
    const { rows } = await db.pool.query(
      "select tgenabled from pg_trigger where tgname = 'outbox_notify' and tgrelid = 'outbox_events'::regclass",
    );
    expect(rows).toEqual([{ tgenabled: "D" }]);
  });

  it("when enabled, wakes an idle dwell relay long before its next poll", async () => {
    await db.pool.query("alter table outbox_events enable trigger outbox_notify");
    const queueUrl = await createFifoQueue(sqs, "notify");
    const idlePollMs = 5_000;
    // Two loops waiting at once: the notification must reach whichever is waiting (each registers a waiter).
    const options = testRelayOptions(queueUrl, {
      mode: "dwell",
      idlePollMinMs: idlePollMs,
      idlePollMaxMs: idlePollMs,
      parallelRounds: 2,
    });
    const wakeUp = await listenForOutboxInserts(db.pool);
    const controller = new AbortController();
    let firstRound: () => void = () => {};
    const idle = new Promise<void>((resolve) => {
      firstRound = resolve;
    });
    let published: (report: RoundReport) => void = () => {};
    const publishedRound = new Promise<RoundReport>((resolve) => {
      published = resolve;
    });
    const onRound = (report: RoundReport) => {
      if (report.claimed === 0) firstRound();
      if (report.published > 0) {
        published(report);
        controller.abort();
      }
    };
    const relay = runRelay(
      {
        pool: db.pool,
        destination: queueDestination(sqs, options),
        deadline: Date.now() + 30_000,
        wakeUp,
        onRound,
        signal: controller.signal,
      },
      options,
    );

    await idle; // the relay found nothing and is now waiting up to idlePollMs
    const started = Date.now();
    await enqueueCommitted(db.pool, anEvent());
    const report = await publishedRound;
    const latency = Date.now() - started;
    const summary = await relay;
    await wakeUp.close();

    expect(report.published).toBe(1);
    expect(summary.stoppedBy).toBe("signal");
    expect(latency).toBeLessThan(idlePollMs / 2);
  });
});
