import { Readable } from "node:stream";
import { SendMessageBatchCommand, SQSClient } from "@aws-sdk/client-sqs";
import { describe, expect, it } from "vitest";
import { sendMessageBatchCommand } from "../../functions/shared/destinations/sqs/batchBody.ts";
import type { SqsMessage } from "../../functions/shared/destinations/sqs/sqsMessage.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";
import { createFifoQueue, receiveAll, sqsClient, useFakeSqs } from "../support/sqs.ts";

/**
 * The relay writes SendMessageBatch's JSON itself (destinations/sqs/batchBody.ts): the request must be the one the
 * SDK's serializer would have sent, and SQS (the emulator, the in-process fake) must read every entry back intact.
 */
const fake = useFakeSqs();

/** What the relay's messages can hold that JSON must escape: quotes, backslashes, controls, non-ASCII, astral. */
const tricky = (id: string, text: string): SqsMessage & { Id: string } => ({
  Id: id,
  MessageBody: JSON.stringify({ text, path: 'C:\\tmp\\"x"', tab: "\t", nl: "a\nb\r\n" }),
  MessageGroupId: `group-${id}:"/\\{}`,
  MessageDeduplicationId: `0193a4c2-7b1e-7c3d-8e4f-00000000000${id}`,
  MessageAttributes: {
    eventType: { DataType: "String", StringValue: `order.${text}` },
    note: { DataType: "String", StringValue: 'line 1\nline 2\t"quoted" \\ \u2028 </script>' },
    ExtendedPayloadSize: { DataType: "Number", StringValue: "1048577" },
  },
  MessageSystemAttributes: {
    AWSTraceHeader: {
      DataType: "String",
      StringValue: "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1",
    },
  },
});
const ENTRIES = [tricky("1", "crème brûlée ✓"), tricky("2", "emoji 😀 and 𝄞"), tricky("3", "plain")];

/** A client whose handler answers every entry as sent and keeps each request it was given, as signed. */
function recordingClient() {
  const requests: { headers: Record<string, string>; body: string }[] = [];
  const handler = {
    metadata: { handlerProtocol: "http/1.1" },
    async handle(request: { headers: Record<string, string>; body?: unknown }) {
      const body =
        typeof request.body === "string"
          ? request.body
          : new TextDecoder().decode(request.body as Uint8Array);
      requests.push({ headers: { ...request.headers }, body });
      const { Entries } = JSON.parse(body) as { Entries: { Id: string }[] };
      const reply = JSON.stringify({
        Successful: Entries.map((entry) => ({ Id: entry.Id, MessageId: `m-${entry.Id}` })),
        Failed: [],
      });
      return {
        response: {
          statusCode: 200,
          headers: { "content-type": "application/x-amz-json-1.0" },
          body: Readable.from([Buffer.from(reply)]),
        },
      };
    },
    updateHttpClientConfig() {},
    httpHandlerConfigs: () => ({}),
    destroy() {},
  };
  const client = new SQSClient({
    ...LOCAL_AWS,
    endpoint: "https://sqs.eu-west-1.amazonaws.com",
    md5: false,
    requestHandler: handler,
  });
  return { client, requests };
}

describe("SendMessageBatch with the relay's own JSON body", () => {
  it("sends the JSON, target, content type and content length the SDK's serializer sends, signed", async () => {
    const { client, requests } = recordingClient();
    const queueUrl = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo";

    const sdk = await client.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: ENTRIES }));
    const ours = await client.send(await sendMessageBatchCommand(queueUrl, ENTRIES));

    const [expected, actual] = requests;
    expect(JSON.parse(actual?.body ?? "")).toEqual(JSON.parse(expected?.body ?? ""));
    for (const header of ["x-amz-target", "content-type", "x-amzn-query-mode", "host"]) {
      expect(actual?.headers[header]).toBe(expected?.headers[header]);
    }
    expect(actual?.headers["content-length"]).toBe(String(Buffer.byteLength(actual?.body ?? "")));
    expect(actual?.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=/);
    expect(ours.Successful?.map((entry) => entry.Id)).toEqual(sdk.Successful?.map((entry) => entry.Id));
    // The input kept its entries: what the caller (and the SDK's MD5 check) reads is what was sent.
    expect((await sendMessageBatchCommand(queueUrl, ENTRIES)).input.Entries).toHaveLength(3);
    client.destroy();
  });

  it.each([
    ["the SQS emulator", () => ({ sqs: sqsClient(), own: true })],
    ["the in-process SQS fake", () => ({ sqs: fake.sqs, own: false })],
  ])("is read back intact by %s, bodies, ids and attributes", async (_name, make) => {
    const { sqs, own } = make();
    const queueUrl = await createFifoQueue(sqs, "batch-body");

    const response = await sqs.send(await sendMessageBatchCommand(queueUrl, ENTRIES));
    const messages = await receiveAll(sqs, queueUrl, ENTRIES.length);

    expect(response.Failed ?? []).toEqual([]);
    const byBody = new Map(messages.map((message) => [message.Body, message]));
    for (const entry of ENTRIES) {
      const message = byBody.get(entry.MessageBody);
      expect(message?.Attributes?.MessageGroupId).toBe(entry.MessageGroupId);
      expect(message?.Attributes?.MessageDeduplicationId).toBe(entry.MessageDeduplicationId);
      for (const [name, value] of Object.entries(entry.MessageAttributes)) {
        expect(message?.MessageAttributes?.[name]).toMatchObject(value);
      }
    }
    if (own) sqs.destroy();
  });

  it("passes the SDK's MD5 check of every entry when the client has it on (the check reads the full input)", async () => {
    const sqs = sqsClient();
    const queueUrl = await createFifoQueue(sqs, "batch-body-md5");

    const response = await sqs.send(await sendMessageBatchCommand(queueUrl, ENTRIES));

    expect(response.Successful).toHaveLength(3);
    expect(response.Successful?.every((entry) => /^[0-9a-f]{32}$/.test(entry.MD5OfMessageBody ?? ""))).toBe(
      true,
    );
    sqs.destroy();
  });
});
