import { createHash } from "node:crypto";
import { request } from "node:http";
import { Readable } from "node:stream";
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  NoSuchBucket,
  NoSuchKey,
  NotFound,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from "@aws-sdk/client-s3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type FakeSqs, startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import { MAX_OBJECT_BYTES } from "../../cli/dev/aws/s3.ts";
import { checksumOf } from "../../cli/dev/aws/s3Checksums.ts";
import { LOCAL_AWS } from "../../local/backends/awsEndpoint.ts";

/**
 * The in-process endpoint's S3 (cli/dev/aws/s3.ts) against the real S3Client with its defaults: path-style
 * requests, CRC32 flexible checksums on every PutObject, checksum validation of GetObject (checksum mode on).
 */
let aws: FakeSqs;
let s3: S3Client;
const bucket = "payloads";

beforeAll(async () => {
  aws = await startFakeSqs();
  s3 = new S3Client({ ...LOCAL_AWS, endpoint: aws.url, forcePathStyle: true });
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
});
afterEach(() => aws.resetFaults());
afterAll(async () => {
  s3.destroy();
  await aws.close();
});

/** An Authorization header scoped to s3, for hand-made requests (the endpoint routes by it; it checks no signature). */
const SIGNED_FOR_S3 =
  "AWS4-HMAC-SHA256 Credential=test/20261203/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0";

const text = async (key: string, client = s3) =>
  (await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }))).Body?.transformToString();

describe("S3 on the in-process endpoint, through the real S3Client", () => {
  it("puts and gets an object: bytes, content type, ETag, and the CRC32 the SDK sent, which it validates back", async () => {
    const body = Buffer.from(JSON.stringify({ blob: "żółw ".repeat(50_000) }));
    const put = await s3.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: "payloads/a b+c",
        Body: body,
        ContentType: "application/json",
      }),
    );
    const md5 = createHash("md5").update(body).digest("hex");
    expect(put.ETag).toBe(`"${md5}"`);
    expect(put.ChecksumCRC32).toBe(checksumOf("crc32", body));
    expect(put.ServerSideEncryption).toBe("AES256");

    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "payloads/a b+c" }));
    expect(got.ContentType).toBe("application/json");
    expect(got.ContentLength).toBe(body.length);
    expect(got.ETag).toBe(`"${md5}"`);
    expect(got.ChecksumCRC32).toBe(checksumOf("crc32", body));
    expect(Buffer.from((await got.Body?.transformToByteArray()) ?? [])).toEqual(body);

    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "payloads/a b+c" }));
    expect(head).toMatchObject({
      ContentLength: body.length,
      ETag: `"${md5}"`,
      ContentType: "application/json",
    });
  });

  it("takes each checksum algorithm the SDK offers, and a stream body (sent aws-chunked, its CRC32 in a trailer)", async () => {
    for (const algorithm of ["CRC32C", "CRC64NVME", "SHA1", "SHA256"] as const) {
      const key = `sum-${algorithm}`;
      await s3.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: key,
          Body: `by ${algorithm}`,
          ChecksumAlgorithm: algorithm,
        }),
      );
      const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      expect(got[`Checksum${algorithm}`]).toBe(
        checksumOf(algorithm.toLowerCase() as "crc32c", Buffer.from(`by ${algorithm}`)),
      );
      expect(await got.Body?.transformToString()).toBe(`by ${algorithm}`);
    }
    const chunks = [Buffer.alloc(70_000, "a"), Buffer.alloc(70_000, "b")];
    await s3.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: "streamed",
        Body: Readable.from(chunks),
        ContentLength: 140_000,
      }),
    );
    expect(await text("streamed")).toBe(Buffer.concat(chunks).toString());
  });

  it("gives an object put without a checksum the CRC64NVME S3 computes", async () => {
    const plain = new S3Client({
      ...LOCAL_AWS,
      endpoint: aws.url,
      forcePathStyle: true,
      requestChecksumCalculation: "WHEN_REQUIRED",
    });
    await plain.send(new PutObjectCommand({ Bucket: bucket, Key: "no-sum", Body: "plain" }));
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "no-sum" }));
    expect(got.ChecksumCRC64NVME).toBe(checksumOf("crc64nvme", Buffer.from("plain")));
    expect(await got.Body?.transformToString()).toBe("plain");
    plain.destroy();
  });

  it("refuses a body that does not match its checksum or Content-MD5 (BadDigest) and keeps nothing", async () => {
    const wrong = checksumOf("crc32", Buffer.from("something else"));
    const error = await s3
      .send(new PutObjectCommand({ Bucket: bucket, Key: "corrupt", Body: "payload", ChecksumCRC32: wrong }))
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(S3ServiceException);
    expect(error).toMatchObject({ name: "BadDigest", $metadata: { httpStatusCode: 400 } });
    const md5 = await s3
      .send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: "corrupt",
          Body: "payload",
          ContentMD5: "AAAAAAAAAAAAAAAAAAAAAA==",
        }),
      )
      .catch((caught: unknown) => caught);
    expect(md5).toMatchObject({ name: "BadDigest" });
    await expect(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "corrupt" }))).rejects.toBeInstanceOf(
      NotFound,
    );
  });

  it("answers a missing key, a missing bucket and a deleted object as S3 does", async () => {
    await expect(text("nothing-here")).rejects.toBeInstanceOf(NoSuchKey);
    await expect(
      s3.send(new GetObjectCommand({ Bucket: "no-such-bucket", Key: "k" })),
    ).rejects.toBeInstanceOf(NoSuchBucket);
    await expect(s3.send(new HeadBucketCommand({ Bucket: "no-such-bucket" }))).rejects.toBeInstanceOf(
      NotFound,
    );
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "gone", Body: "x" }));
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: "gone" }));
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: "gone" })); // deleting what is not there succeeds
    await expect(text("gone")).rejects.toBeInstanceOf(NoSuchKey);
    const invalid = await s3
      .send(new CreateBucketCommand({ Bucket: "Not_Valid" }))
      .catch((caught: unknown) => caught);
    expect(invalid).toMatchObject({ name: "InvalidBucketName" });
    await s3.send(new CreateBucketCommand({ Bucket: "emptied" }));
    await s3.send(new PutObjectCommand({ Bucket: "emptied", Key: "k", Body: "x" }));
    await expect(s3.send(new DeleteBucketCommand({ Bucket: "emptied" }))).rejects.toMatchObject({
      name: "BucketNotEmpty",
    });
    await s3.send(new DeleteObjectCommand({ Bucket: "emptied", Key: "k" }));
    await s3.send(new DeleteBucketCommand({ Bucket: "emptied" }));
  });

  it("serves a client without forcePathStyle too: by path on an IP endpoint, as <bucket>.localhost on localhost", async () => {
    const byIp = new S3Client({ ...LOCAL_AWS, endpoint: aws.url });
    await byIp.send(new PutObjectCommand({ Bucket: bucket, Key: "by-default", Body: "path" }));
    expect(await text("by-default", byIp)).toBe("path");
    byIp.destroy();
    // Whether `<bucket>.localhost` resolves depends on the machine's resolver; the Host header is what S3 reads
    // (fetch cannot set it, so node:http).
    const body = await new Promise<string>((resolve, reject) => {
      const get = request(`${aws.url}/by-default`, {
        headers: { host: `${bucket}.localhost:${new URL(aws.url).port}`, authorization: SIGNED_FOR_S3 },
      });
      get.on("response", (response) => {
        let text = "";
        response.on("data", (chunk: Buffer) => {
          text += chunk.toString();
        });
        response.on("end", () => resolve(text));
      });
      get.on("error", reject);
      get.end();
    });
    expect(body).toBe("path");
  });

  it("applies the endpoint's faults to S3: throttling as SlowDown, which the SDK retries", async () => {
    let calls = 0;
    aws.setFaults({ throttle: (action) => action === "PutObject" && ++calls === 1 });
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "after-throttle", Body: "ok" }));
    expect(calls).toBe(2);
    aws.setFaults({ throttle: (action) => action === "GetObject" });
    const once = new S3Client({ ...LOCAL_AWS, endpoint: aws.url, forcePathStyle: true, maxAttempts: 1 });
    await expect(text("after-throttle", once)).rejects.toMatchObject({
      name: "SlowDown",
      $metadata: { httpStatusCode: 503 },
    });
    once.destroy();
  });

  it("refuses an object over its in-memory limit from the declared length, before reading the body", async () => {
    const answer = await new Promise<{ status: number | undefined; body: string }>((resolve, reject) => {
      const put = request(`${aws.url}/${bucket}/huge`, {
        method: "PUT",
        headers: {
          authorization:
            "AWS4-HMAC-SHA256 Credential=test/20261203/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0",
          "content-length": String(MAX_OBJECT_BYTES + 1),
        },
      });
      put.on("response", (response) => {
        let body = "";
        response.on("data", (chunk: Buffer) => {
          body += chunk.toString();
        });
        response.on("end", () => resolve({ status: response.statusCode, body }));
      });
      put.on("error", reject);
      put.flushHeaders(); // the body never comes: the answer must not wait for it
    });
    expect(answer.status).toBe(400);
    expect(answer.body).toMatch(/<Code>EntityTooLarge<\/Code>/);
    expect(answer.body).toContain(`<MaxSizeAllowed>${MAX_OBJECT_BYTES}</MaxSizeAllowed>`);
  });
});
