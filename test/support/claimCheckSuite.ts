import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { CreateBucketCommand, DeleteObjectCommand, GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { Context, ScheduledEvent } from "aws-lambda";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pollOnce } from "../../cli/dev/aws/sqsEventSource.ts";
import {
  createInboxHandler,
  type InboxEvent,
  type SqsRecord,
} from "../../functions/shared/consumer/index.ts";
import { EXTENDED_PAYLOAD_SIZE, POINTER_CLASS } from "../../functions/shared/outbox/payloadPointer.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { freePort } from "../../local/backends/freePort.ts";
import { bundleOptions } from "../../scripts/lambdaBundles.ts";
import { CONSUMER_SCHEMA, createConsumerTables, inboxIds, relayRecord } from "./consumer.ts";
import { useTestDatabase } from "./db.ts";
import { anEvent } from "./factories.ts";
import { lambdaContext, relayLambdaEnv } from "./lambda.ts";
import { publishedRow } from "./outboxRows.ts";
import { PRIVATE } from "./privateSchema.ts";
import { enqueueCommitted } from "./produce.ts";
import { createFifoQueue, sqsClient } from "./sqs.ts";

const MIB = 1_048_576;
const scheduled = { "detail-type": "Scheduled Event", source: "aws.events", detail: {} } as ScheduledEvent;

/** An AWS endpoint serving SQS and S3 for one test file: its URL, and how to stop it. */
export interface ClaimCheckEndpoint {
  url: string;
  close(): Promise<void>;
}

/**
 * Issue 31, the claim check, end to end: the bundled relay Lambda against Postgres and an AWS endpoint (S3 and
 * SQS), then the inbox reading what it sent. Payloads of 5 and 40 MiB go through S3 and arrive intact, in order
 * with their group's small events; an unreachable S3 delays them and dead-letters nothing; a missing object fails
 * its record. One endpoint per test file: the consumer's S3 client is made once per module instance (as once per
 * Lambda container), from the environment, so a second endpoint in the same file would not be the one it reads.
 * Call at the top level of a test file.
 */
export function claimCheckSuite(endpointName: string, start: () => Promise<ClaimCheckEndpoint>): void {
  const db = useTestDatabase();
  const workDir = mkdtempSync(join(tmpdir(), "outbox-claim-check-"));
  const bucket = `outbox-payloads-${Date.now()}`;
  let bundle: string;
  let queueUrl: string;
  let aws: ClaimCheckEndpoint;
  let endpoint: string;
  let sqs: SQSClient;
  let s3: S3Client;

  beforeAll(async () => {
    aws = await start();
    endpoint = aws.url;
    sqs = sqsClient(endpoint);
    s3 = new S3Client({ ...LOCAL_AWS, endpoint, forcePathStyle: true });
    await build(bundleOptions("relay", workDir));
    bundle = pathToFileURL(join(workDir, "index.mjs")).href;
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    queueUrl = await createFifoQueue(sqs, "claim-check");
    await db.pool.query(`update ${PRIVATE}.outbox_limits set max_payload_bytes = 67108864`);
    await createConsumerTables(db.pool);
    // The consumer's S3 client reads the endpoint, region and credentials from the environment, as in Lambda.
    Object.assign(process.env, {
      AWS_ENDPOINT_URL: endpoint,
      AWS_REGION: LOCAL_AWS.region,
      AWS_ACCESS_KEY_ID: LOCAL_AWS.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: LOCAL_AWS.credentials.secretAccessKey,
    });
  }, 120_000);
  afterAll(async () => {
    rmSync(workDir, { recursive: true, force: true });
    s3?.destroy();
    sqs?.destroy();
    await aws?.close();
  });

  /** A cold start of the bundled relay with this environment: a fresh module instance per container. */
  async function invokeRelay(container: string, env: Record<string, string>) {
    Object.assign(
      process.env,
      relayLambdaEnv({
        DATABASE_URL: db.url,
        OUTBOX_QUEUE_URL: queueUrl,
        AWS_ENDPOINT_URL: endpoint,
        OUTBOX_PAYLOAD_BUCKET: bucket,
        OUTBOX_PAYLOAD_PREFIX: "payloads/",
        RELAY_MODE: "drain",
        RELAY_PUBLISH_TIMEOUT_MS: "90000",
        RELAY_STATEMENT_TIMEOUT_MS: "30000",
        ...env,
      }),
    );
    const { handler } = (await import(`${bundle}?${container}`)) as {
      handler: (event: ScheduledEvent, context: Context) => Promise<{ published: number }>;
    };
    return handler(scheduled, lambdaContext(300_000)).catch((error: unknown) => error);
  }

  const blob = (bytes: number, fill: string) => ({ blob: fill.repeat(bytes / fill.length) });

  describe(`the claim check, bundled relay to inbox, on ${endpointName}`, () => {
    it("sends 5 and 40 MiB payloads through S3 in order with their group's events; an S3 outage dead-letters nothing", async () => {
      const group = "doc-1";
      const events = [
        anEvent({ aggregateId: group, eventType: "doc.created", payload: { step: 1 } }),
        anEvent({ aggregateId: group, eventType: "doc.uploaded", payload: blob(5 * MIB, "abcd") }),
        anEvent({ aggregateId: group, eventType: "doc.tagged", payload: { step: 3 } }),
        anEvent({ aggregateId: group, eventType: "doc.uploaded", payload: blob(40 * MIB, "wxyz") }),
        anEvent({ aggregateId: group, eventType: "doc.closed", payload: { step: 5 } }),
      ];
      const ids = (await enqueueCommitted(db.pool, events, { maxPayloadBytes: 64 * MIB })).map(
        (row) => row.id,
      );

      // S3 unreachable (a port nothing listens on): the first event goes, the 5 MiB one waits, nothing dies.
      const deadPort = await freePort();
      await invokeRelay("outage", { AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${deadPort}` });
      const { rows: during } = await db.pool.query(
        `select id, processed_at is not null as published, dead_lettered_at is not null as dead, attempts,
              transient_failures, last_error
       from outbox_events order by seq`,
      );
      const byId = new Map(during.map((row) => [row.id, row]));
      expect(byId.get(ids[0])).toEqual(publishedRow());
      expect(ids.slice(1).map((id) => byId.get(id)?.published)).toEqual([false, false, false, false]);
      expect(during.some((row) => row.dead)).toBe(false);
      expect(byId.get(ids[1])).toMatchObject({ attempts: 0 });
      expect(byId.get(ids[1])?.transient_failures).toBeGreaterThan(0);
      expect(byId.get(ids[1])?.last_error).toMatch(/S3 PutObject s3:\/\/.*\/payloads\/.* failed/);
      await db.pool.query("update outbox_events set available_at = now() where processed_at is null");

      delete process.env.AWS_ENDPOINT_URL_S3;
      await invokeRelay("recovered", {});
      const { rows: after } = await db.pool.query(
        "select count(*)::int as n from outbox_events where processed_at is null or dead_lettered_at is not null",
      );
      expect(after[0].n).toBe(0);

      // The inbox, fed by SQS as Lambda's event source would: the raw records, then what the handler saw.
      const records: SqsRecord[] = [];
      const seen: InboxEvent[] = [];
      const inbox = createInboxHandler((event) => void seen.push(event), {
        pool: db.pool,
        schema: CONSUMER_SCHEMA,
      });
      for (let poll = 0; poll < 20 && seen.length < events.length; poll++) {
        await pollOnce(sqs, queueUrl, async (event, context) => {
          records.push(...event.Records);
          return inbox(event, context);
        });
      }
      expect(seen.map((event) => event.id)).toEqual(ids);
      expect(seen.map((event) => event.payload)).toEqual(events.map((event) => event.payload));
      expect(await inboxIds(db.pool)).toEqual(expect.arrayContaining(ids));

      // On the wire: the Extended Client's pointer and attribute, and the object holds the payload's bytes.
      for (const index of [1, 3]) {
        const record = records.find(
          (candidate) => candidate.messageAttributes?.outboxId?.stringValue === ids[index],
        );
        const expected = JSON.stringify(events[index]?.payload);
        expect(JSON.parse(record?.body ?? "")).toEqual([
          POINTER_CLASS,
          { s3BucketName: bucket, s3Key: `payloads/${ids[index]}` },
        ]);
        expect(record?.messageAttributes?.[EXTENDED_PAYLOAD_SIZE]).toEqual({
          dataType: "Number",
          stringValue: String(Buffer.byteLength(expected)),
        });
        const object = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: `payloads/${ids[index]}` }));
        expect(await object.Body?.transformToString()).toBe(expected);
      }
      const small = records.find((record) => record.messageAttributes?.outboxId?.stringValue === ids[0]);
      expect(small?.body).toBe('{"step":1}');
      expect(small?.messageAttributes?.[EXTENDED_PAYLOAD_SIZE]).toBeUndefined();
    }, 480_000);

    it("fails a record whose object is missing, loudly, and applies nothing", async () => {
      const key = `payloads/gone-${Date.now()}`;
      await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
      const record = relayRecord({
        aggregateId: "doc-gone",
        seq: 1,
        payload: [POINTER_CLASS, { s3BucketName: bucket, s3Key: key }],
      });
      const errors: unknown[] = [];
      const handled: InboxEvent[] = [];
      const inbox = createInboxHandler((event) => void handled.push(event), {
        pool: db.pool,
        schema: CONSUMER_SCHEMA,
        onOutcome: (outcome) => {
          if (outcome.status === "failed") errors.push(outcome.error);
        },
      });

      const response = await inbox({ Records: [record] }, lambdaContext(30_000));

      expect(response?.batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
      expect(handled).toEqual([]);
      expect(String(errors[0])).toMatch(
        new RegExp(`payload: points to s3://${bucket}/${key}, which does not exist`),
      );
      const { rows } = await db.pool.query(
        `select count(*)::int as n from ${CONSUMER_SCHEMA}.inbox where outbox_id = $1`,
        [record.messageAttributes?.outboxId?.stringValue],
      );
      expect(rows[0].n).toBe(0);
    });
  });
}
