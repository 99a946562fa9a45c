import { describe, expect, it } from "vitest";
import { type Queryable, type SessionClient, withTransaction } from "../../functions/shared/db/session.ts";
import type { Destination } from "../../functions/shared/destinations/destination.ts";
import { redriveDeadLetters } from "../../functions/shared/operate/sql/redriveDeadLetters.ts";
import { outboxNames } from "../../functions/shared/outbox/names.ts";
import { enqueue } from "../../functions/shared/produce/enqueue.ts";
import { waitFor } from "../chaos/support/waitFor.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { drain, queueDestination, testRelayOptions } from "../support/relay.ts";
import { openSession, waitsOnLock } from "../support/sessions.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

/**
 * Issue 28, finding 8: redrive locked the pending successors it could see, then, in a second statement, returned
 * the dead letter to pending and judged `overtaken`. A successor committed between the two was claimed and
 * published by a relay while redrive said `overtaken: false`: the queue got the successor before the dead
 * letter. Redrive must hold the groups' commit-order locks while it decides.
 *
 * The interleaving is forced, not hoped for: redrive's client is wrapped so that, just before its UPDATE, a
 * producer commits a successor (or is seen waiting for redrive's lock) and a relay claims it and is held in the
 * middle of publishing it (a destination that waits for the test).
 */
const db = useTestDatabase();
const aws = useFakeSqs();
const names = outboxNames({});

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, opened };
}

describe("redrive and a successor committed while it decides", () => {
  it("no successor slips between redrive's statements: the dead letter reaches the queue first, or redrive says overtaken", async () => {
    const queueUrl = await createFifoQueue(aws.sqs, "redrive-successor");
    const group = `redrive-successor-${Date.now()}`;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into outbox_events (aggregate_type, aggregate_id, event_type, payload, attempts, dead_lettered_at)
       values ('order', $1, 'e', '{}', 10, now()) returning id`,
      [group],
    );
    const dead = rows[0]?.id ?? "";

    const real: Destination = queueDestination(aws.sqs, { queueUrl });
    const publishing = gate();
    const release = gate();
    const held: Destination = {
      kind: real.kind,
      target: real.target,
      maxBatchEntries: real.maxBatchEntries,
      maxBatchBytes: real.maxBatchBytes,
      maxMessageBytes: real.maxMessageBytes,
      prepare: (row) => real.prepare(row),
      async send(batch, signal) {
        publishing.open();
        await release.opened;
        return real.send(batch, signal);
      },
    };
    const options = testRelayOptions(queueUrl, { publishTimeoutMs: 20_000, statementTimeoutMs: 20_000 });

    const producer = await openSession(db.url);
    producer.client.on("error", () => {}); // the database is dropped with force after the file
    let successor: string | undefined;
    let relaying: Promise<unknown> | undefined;
    let producing: Promise<void> | undefined;
    const interleave = async () => {
      await producer.client.query("begin");
      producing = enqueue(producer.client, anEvent({ aggregateId: group })).then(async (event) => {
        await producer.client.query("commit");
        successor = event.id;
      });
      await waitFor(
        "the successor to commit, or its producer to wait for redrive's group lock",
        async () => successor !== undefined || (await waitsOnLock(db.pool, producer.pid)),
        10_000,
      );
      if (successor === undefined) return; // held off by redrive: it commits after redrive
      // Committed: a relay claims it (the dead letter does not block its group) and is mid-publish.
      relaying = drain(db.pool, held, options);
      await publishing.opened;
    };

    let interleaved = false;
    const redriven = await withTransaction(db.pool, (client: SessionClient) => {
      const forced: Queryable = {
        async query(text, values) {
          if (!interleaved && /^\s*update\b/i.test(text)) {
            interleaved = true;
            await interleave();
          }
          return client.query(text, values);
        },
      };
      return redriveDeadLetters(forced, names, { ids: [dead] });
    });
    release.open();
    await producing;
    await relaying;
    await producer.client.end();
    await drain(db.pool, real, options);

    expect(interleaved).toBe(true);
    const order = aws.fake
      .deliveries()
      .filter((delivery) => !delivery.duplicate)
      .map((delivery) => delivery.dedupId);
    expect({ overtaken: redriven[0]?.overtaken, order }).toEqual({
      overtaken: false,
      order: [dead, successor],
    });
  });
});
