import { CreateSecretCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDatabasePool } from "../../functions/shared/db/connection.ts";
import { relayInvocation } from "../../functions/shared/relay/invocation.ts";
import { relayConfigFromEnv } from "../../functions/shared/relay/settings.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { useTestDatabase } from "../support/db.ts";
import { anEvent } from "../support/factories.ts";
import { relayLambdaEnv } from "../support/lambda.ts";
import { PRIVATE } from "../support/privateSchema.ts";
import { enqueueCommitted } from "../support/produce.ts";
import { queueDestination } from "../support/relay.ts";
import { createFifoQueue, useFakeSqs } from "../support/sqs.ts";

/**
 * Issue 28, finding 3: the relay checked the order key once per invocation, while its pool follows a moved secret
 * on any checkout (db/connection.ts). Checked on database A, the secret moved to B, where the check refuses: a
 * warm dwell run went on relaying B's events for the rest of the invocation. The first round on a new target
 * must run the check there first.
 */
const a = useTestDatabase();
const b = useTestDatabase();
const aws = useFakeSqs();
const secrets = new SecretsManagerClient({ ...LOCAL_AWS, endpoint: inject("awsEndpoint") });
const quiet = { info() {}, warn() {}, error() {} };
const cleanups: (() => Promise<void>)[] = [];
let queueUrl: string;

beforeAll(async () => {
  queueUrl = await createFifoQueue(aws.sqs, "order-key-retarget");
});
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  secrets.destroy();
});

/** A secret in the RDS format that points at `url`'s database. */
async function secretFor(url: string): Promise<string> {
  const parsed = new URL(url);
  const { ARN } = await secrets.send(
    new CreateSecretCommand({
      Name: `outbox/order-key-retarget/${Date.now()}-${Math.random()}`,
      SecretString: JSON.stringify({
        engine: "postgres",
        host: parsed.hostname,
        port: Number(parsed.port),
        username: decodeURIComponent(parsed.username),
        password: decodeURIComponent(parsed.password),
        dbname: parsed.pathname.slice(1),
      }),
    }),
  );
  if (ARN === undefined) throw new Error("CreateSecret returned no ARN");
  return ARN;
}

describe("the order-key check follows the pool to a new target", () => {
  it("a secret moved mid-run to a database whose sequence ran backwards stops the relay before it relays there", async () => {
    // B: seq 1002 was published and purged (the high-water mark keeps it); its sequence is far below.
    await b.pool.query(
      `insert into ${PRIVATE}.outbox_group_high_water (aggregate_id, purged_published_seq) values ('order-b', 1002)`,
    );
    const onB = await enqueueCommitted(b.pool, anEvent({ aggregateId: "order-b" }));
    const onA = await enqueueCommitted(a.pool, anEvent({ aggregateId: "order-a" }));

    const secretA = await secretFor(a.url);
    const secretB = await secretFor(b.url);
    // The relay knows secret A only; what "A" holds is switched in one step, as PutSecretValue would (an SDK
    // middleware, so the switch happens exactly between two rounds).
    let current = secretA;
    const client = new SecretsManagerClient({ ...LOCAL_AWS, endpoint: inject("awsEndpoint") });
    client.middlewareStack.add(
      (next) => (args) => {
        const input = args.input as { SecretId?: string };
        if (input.SecretId === secretA) args.input = { ...input, SecretId: current };
        return next(args);
      },
      { step: "initialize", name: "moveSecret" },
    );
    cleanups.push(async () => client.destroy());
    const env = relayLambdaEnv({
      DATABASE_URL: "",
      OUTBOX_QUEUE_URL: queueUrl,
      AWS_ENDPOINT_URL: aws.fake.url,
      RELAY_MODE: "dwell",
      RELAY_IDLE_POLL_MIN_MS: "10",
      RELAY_IDLE_POLL_MAX_MS: "20",
    });
    const { DATABASE_URL: _, ...withoutUrl } = env;
    const config = relayConfigFromEnv({
      ...withoutUrl,
      DATABASE_SECRET_ARN: secretA,
      DATABASE_SSLMODE: "disable",
      // 0: every checkout may re-read the secret, so the move is followed at the next one.
      DATABASE_SECRET_TTL_SECONDS: "0",
    });
    const pool = await createDatabasePool(config.database, {
      max: 2,
      applicationName: "order-key-retarget",
      secrets: client,
    });
    cleanups.push(() => pool.end());

    let rounds = 0;
    const invocation = relayInvocation(
      {
        pool,
        destination: queueDestination(aws.sqs, { queueUrl }),
        deadline: Date.now() + 4_000,
        logger: quiet,
        onRound() {
          rounds++;
          if (rounds === 1) current = secretB;
        },
      },
      config,
    );

    await expect(invocation).rejects.toMatchObject({ name: "OrderKeyError" });
    await expect(invocation).rejects.toThrow(/1002/);
    expect(rounds).toBeGreaterThanOrEqual(1);
    // A's event went out from A; nothing went out from B.
    expect(aws.fake.deliveries().map((delivery) => delivery.dedupId)).toEqual([onA.id]);
    const { rows } = await b.pool.query("select processed_at from outbox_events where id = $1", [onB.id]);
    expect(rows[0]?.processed_at).toBeNull();
  });
});
