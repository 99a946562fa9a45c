import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { CreateStreamCommand, KinesisClient } from "@aws-sdk/client-kinesis";
import { CreateTopicCommand, SNSClient } from "@aws-sdk/client-sns";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createDestination } from "../../functions/shared/destinations/create.ts";
import { destinationSettingFromEnv } from "../../functions/shared/destinations/setting.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { freePort } from "../../local/backends/freePort.ts";

const endpoint = inject("awsEndpoint");
const sns = new SNSClient({ ...LOCAL_AWS, endpoint });
const kinesis = new KinesisClient({ ...LOCAL_AWS, endpoint, requestHandler: new NodeHttpHandler({}) });
afterAll(() => {
  sns.destroy();
  kinesis.destroy();
});

const suffix = () => randomBytes(4).toString("hex");
const ACCOUNT = "arn:aws:sns:us-east-1:123456789012";

/** The relay's start check of a route table, as the relay Lambda makes it on its first invocation. */
async function check(routes: unknown[], at = endpoint) {
  const setting = destinationSettingFromEnv({ OUTBOX_ROUTES: JSON.stringify(routes) });
  const { destination, destroy } = await createDestination(setting, {
    sockets: 2,
    requestTimeoutMs: 5_000,
    endpoint: at,
    ...LOCAL_AWS,
  });
  try {
    return await destination.check?.(5_000);
  } finally {
    destroy();
  }
}

describe(`start checks of topics and streams (${inject("awsSource")})`, () => {
  let fifoTopic: string;
  let standardTopic: string;
  let streamArn: string;

  beforeAll(async () => {
    const name = `checks-${suffix()}`;
    const [fifo, standard] = await Promise.all([
      sns.send(new CreateTopicCommand({ Name: `${name}.fifo`, Attributes: { FifoTopic: "true" } })),
      sns.send(new CreateTopicCommand({ Name: name })),
      kinesis.send(new CreateStreamCommand({ StreamName: name, ShardCount: 1 })),
    ]);
    fifoTopic = fifo.TopicArn as string;
    standardTopic = standard.TopicArn as string;
    streamArn = `arn:aws:kinesis:us-east-1:123456789012:stream/${name}`;
  });

  it("verifies topics and a stream that exist and fit their routes' kinds", async () => {
    await expect(
      check([
        { match: { aggregateType: "a" }, destination: { kind: "sns-fifo", topicArn: fifoTopic } },
        { match: { aggregateType: "b" }, destination: { kind: "sns", topicArn: standardTopic } },
        { match: { aggregateType: "c" }, destination: { kind: "kinesis", streamArn } },
      ]),
    ).resolves.toEqual({ verified: true });
  });

  it("refuses a topic that does not exist, naming the route and the topic", async () => {
    const missing = `${ACCOUNT}:nope-${suffix()}.fifo`;
    await expect(
      check([{ match: {}, destination: { kind: "sns-fifo", topicArn: missing } }]),
    ).rejects.toThrow(
      new RegExp(
        `^route to sns-fifo:nope-\\w+\\.fifo: topic ${missing.replaceAll(".", "\\.")} does not exist`,
      ),
    );
  });

  it("refuses a stream that does not exist, naming the route and the stream", async () => {
    const missing = `arn:aws:kinesis:us-east-1:123456789012:stream/nope-${suffix()}`;
    await expect(
      check([{ match: {}, destination: { kind: "kinesis", streamArn: missing } }]),
    ).rejects.toThrow(
      /^route to kinesis:nope-\w+: stream arn:aws:kinesis:\S+ does not exist \(check the route's streamArn/,
    );
  });
});

describe("an unverified route names the endpoint its client used (issue 38)", () => {
  for (const [variable, service] of [
    ["AWS_ENDPOINT_URL_SNS", "sns"],
    ["AWS_ENDPOINT_URL", "kinesis"],
  ] as const) {
    it(`${variable}, for ${service}, not the region's endpoint`, async () => {
      // Nothing listens there: the check cannot reach it, and says where it tried.
      const closed = `http://127.0.0.1:${await freePort()}`;
      const destination =
        service === "sns"
          ? { kind: "sns", topicArn: `${ACCOUNT}:orders` }
          : { kind: "kinesis", streamArn: "arn:aws:kinesis:us-east-1:123456789012:stream/clicks" };
      const before = process.env[variable];
      process.env[variable] = closed;
      try {
        const setting = destinationSettingFromEnv({
          OUTBOX_ROUTES: JSON.stringify([{ match: {}, destination }]),
        });
        // No `endpoint` option: the SDK takes the variable, as in a Lambda with AWS_ENDPOINT_URL set.
        const created = await createDestination(setting, {
          sockets: 2,
          requestTimeoutMs: 5_000,
          ...LOCAL_AWS,
        });
        try {
          const result = await created.destination.check?.(5_000);
          expect(result).toEqual({
            verified: false,
            reason: expect.stringContaining(` at ${closed}:`),
          });
          expect(result?.verified === false && result.reason).not.toMatch(/amazonaws\.com/);
        } finally {
          created.destroy();
        }
      } finally {
        if (before === undefined) delete process.env[variable];
        else process.env[variable] = before;
      }
    });
  }
});

/**
 * What moto does not model: a stream with the AUTO record distribution strategy, one still being created, and a
 * role without the describe permission. An in-process endpoint answers DescribeStreamSummary with Kinesis's JSON
 * (AWS JSON 1.1, as the SDK reads it).
 */
describe("start check of a stream, against Kinesis's answers moto cannot give", () => {
  let answer: { status: number; body: unknown } = { status: 200, body: {} };
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(answer.status, { "content-type": "application/x-amz-json-1.1" });
      res.end(JSON.stringify(answer.body));
    });
  });
  let url: string;
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const streamArn = "arn:aws:kinesis:us-east-1:123456789012:stream/clicks";
  const route = [{ match: {}, destination: { kind: "kinesis", streamArn } }];
  const summary = (fields: Record<string, unknown>) => ({
    status: 200,
    body: {
      StreamDescriptionSummary: {
        StreamName: "clicks",
        StreamARN: streamArn,
        StreamStatus: "ACTIVE",
        RetentionPeriodHours: 24,
        StreamCreationTimestamp: 1_700_000_000,
        EnhancedMonitoring: [],
        OpenShardCount: 1,
        ...fields,
      },
    },
  });

  it("refuses a stream whose AUTO distribution ignores partition keys", async () => {
    answer = summary({ RecordDistributionStrategy: "AUTO", StreamModeDetails: { StreamMode: "ON_DEMAND" } });
    await expect(check(route, url)).rejects.toThrow(
      /^route to kinesis:clicks: stream \S+ uses the AUTO record distribution strategy, which ignores partition keys/,
    );
    answer = summary({ RecordDistributionStrategy: "USER_PARTITION_KEY", StreamStatus: "UPDATING" });
    await expect(check(route, url)).resolves.toEqual({ verified: true });
  });

  it("a stream still CREATING, or Kinesis unreachable, leaves the route unverified instead of stopping the other routes", async () => {
    answer = summary({ StreamStatus: "CREATING" });
    await expect(check(route, url)).resolves.toEqual({
      verified: false,
      reason: expect.stringMatching(/^kinesis:clicks: stream \S+ is still CREATING/),
    });
    answer = { status: 503, body: { __type: "ServiceUnavailable", message: "down" } };
    await expect(check(route, url)).resolves.toEqual({
      verified: false,
      reason: expect.stringMatching(/^kinesis:clicks: cannot check stream \S+: .*down/),
    });
  });

  it("goes on unverified when the role may not describe the stream, saying which permission the check needs", async () => {
    answer = {
      status: 400,
      body: {
        __type: "AccessDeniedException",
        message: "User is not authorized to perform DescribeStreamSummary",
      },
    };
    const result = await check(route, url);
    expect(result).toEqual({
      verified: false,
      reason: expect.stringMatching(
        /^kinesis:clicks: not allowed to describe stream \S+ \(AccessDeniedException\): the start check needs kinesis:DescribeStreamSummary/,
      ),
    });
  });
});
