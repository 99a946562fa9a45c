/**
 * The S3 part of the in-process endpoint, as small as the claim check needs: the relay's PutObject of a large
 * payload and the consumer's GetObject of it (the Extended Client's pointer), plus CreateBucket, HeadBucket,
 * DeleteBucket, HeadObject and DeleteObject. It speaks S3's REST protocol as `S3Client` does against a custom
 * endpoint: path-style addressing (`/bucket/key`; the SDK uses it for an IP endpoint even without
 * `forcePathStyle`) or `<bucket>.localhost`, XML errors, and the flexible checksums SDK v3 sends by default (s3Checksums.ts): a checksum
 * sent with a PUT, as a header or an aws-chunked trailer, is verified (BadDigest) and returned by a GET that asks
 * with `x-amz-checksum-mode: ENABLED`; an object sent without one gets CRC64NVME, as S3 does (Amazon S3 User
 * Guide, "Checking object integrity"). server.ts routes a request here by the `s3` in its signature's scope.
 *
 * Not modelled: listing, multipart uploads, copies, ranges, versions, conditional requests, ACLs and policies,
 * lifecycle rules, virtual-hosted addressing other than on `*.localhost`, signature verification.
 */
import { createHash, randomUUID } from "node:crypto";
import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import { MAX_PAYLOAD_BYTES_LIMIT } from "../../../functions/shared/outbox/payloadPointer.ts";
import { REGION } from "./account.ts";
import { CHECKSUM_ALGORITHMS, type ChecksumAlgorithm, checksumOf } from "./s3Checksums.ts";
import { ServiceError } from "./serviceError.ts";

/**
 * The largest object this endpoint holds (S3 takes 5 GB in one PUT). Objects live in memory and the claim check,
 * their only writer here, uploads at most its payload limit; larger is refused (EntityTooLarge) before it is read.
 */
export const MAX_OBJECT_BYTES = MAX_PAYLOAD_BYTES_LIMIT;

/** An error S3 answers with: `code` is the XML Error/Code the SDK maps to its exception (NoSuchKey, ...). */
export class S3Error extends ServiceError {
  readonly extra: Record<string, string>;
  constructor(code: string, message: string, status: number, extra: Record<string, string> = {}) {
    super(code, message, status);
    this.extra = extra;
  }
}

/** A request as server.ts hands it over: the body already read (and still aws-chunked if it was sent so). */
export interface S3Request {
  method: string;
  /** The raw path and query, as on the request line. */
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export interface S3Answer {
  status: number;
  headers: Record<string, string>;
  body?: Buffer | string;
}

interface StoredObject {
  data: Buffer;
  etag: string;
  lastModified: Date;
  contentType: string;
  metadata: Record<string, string>;
  /** The checksum the object was uploaded with, or the CRC64NVME S3 computes instead (computed on first ask). */
  checksum: { algorithm: ChecksumAlgorithm; value: string } | undefined;
}

/** Subresources (`?tagging`, `?uploads`, ...) name other operations, none of which are modelled. */
const PLAIN_QUERY = new Set(["x-id"]);

export class S3Service {
  readonly #buckets = new Map<string, Map<string, StoredObject>>();

  /** The operation's name, for the server's fault predicates and counters. */
  static actionOf(method: string, url: string, host: string | undefined): string {
    const { key } = locate(url, host);
    const object = key !== undefined;
    switch (method) {
      case "PUT":
        return object ? "PutObject" : "CreateBucket";
      case "GET":
        return object ? "GetObject" : "ListObjects";
      case "HEAD":
        return object ? "HeadObject" : "HeadBucket";
      case "DELETE":
        return object ? "DeleteObject" : "DeleteBucket";
      default:
        return method;
    }
  }

  /** The bucket a request is about (for the fault predicates, like a queue name). */
  static bucketOf(url: string, host: string | undefined): string | undefined {
    return locate(url, host).bucket;
  }

  /** Refuses a PUT whose declared size is over the limit before its body is read. */
  static checkSize(headers: IncomingHttpHeaders): void {
    const declared = Number(headers["x-amz-decoded-content-length"] ?? headers["content-length"] ?? 0);
    if (declared > MAX_OBJECT_BYTES) {
      throw new S3Error(
        "EntityTooLarge",
        `Your proposed upload exceeds the maximum allowed size: this local endpoint holds objects of up to ${MAX_OBJECT_BYTES} bytes in memory.`,
        400,
        { ProposedSize: String(declared), MaxSizeAllowed: String(MAX_OBJECT_BYTES) },
      );
    }
  }

  handle(request: S3Request): S3Answer {
    const { bucket, key, query } = locate(request.url, request.headers.host);
    for (const name of query.keys()) {
      if (!PLAIN_QUERY.has(name)) throw notImplemented(`the ?${name} subresource`);
    }
    if (bucket === undefined) throw notImplemented("ListBuckets");
    if (key === undefined) return this.#bucketRequest(request.method, bucket);
    switch (request.method) {
      case "PUT":
        if (request.headers["x-amz-copy-source"] !== undefined) throw notImplemented("CopyObject");
        return this.#put(bucket, key, request);
      case "GET":
      case "HEAD":
        return this.#get(bucket, key, request);
      case "DELETE":
        // Deleting a key that is not there succeeds, as in S3 (204 either way).
        this.#bucket(bucket).delete(key);
        return { status: 204, headers: {} };
      default:
        throw notImplemented(`${request.method} on an object`);
    }
  }

  #bucketRequest(method: string, bucket: string): S3Answer {
    switch (method) {
      case "PUT": {
        checkBucketName(bucket);
        // This endpoint's Region is us-east-1, where S3 answers 200 to the owner re-creating a bucket, for legacy
        // compatibility; every other Region answers BucketAlreadyOwnedByYou (Amazon S3 API Reference, "CreateBucket").
        if (!this.#buckets.has(bucket)) this.#buckets.set(bucket, new Map());
        return { status: 200, headers: { location: `/${bucket}` } };
      }
      case "HEAD":
        this.#bucket(bucket);
        return { status: 200, headers: { "x-amz-bucket-region": REGION } };
      case "DELETE":
        if (this.#bucket(bucket).size > 0) {
          throw new S3Error("BucketNotEmpty", "The bucket you tried to delete is not empty", 409, {
            BucketName: bucket,
          });
        }
        this.#buckets.delete(bucket);
        return { status: 204, headers: {} };
      default:
        throw notImplemented(method === "GET" ? "ListObjects" : `${method} on a bucket`);
    }
  }

  #put(bucket: string, key: string, request: S3Request): S3Answer {
    const objects = this.#bucket(bucket);
    if (Buffer.byteLength(key) > 1024) {
      throw new S3Error("KeyTooLongError", "Your key is too long", 400, { Key: key });
    }
    const { headers } = request;
    const { data, trailers } = isChunked(headers)
      ? decodeChunked(request.body)
      : { data: request.body, trailers: {} };
    const md5 = createHash("md5").update(data);
    const contentMd5 = header(headers, "content-md5");
    const md5Base64 = md5.copy().digest("base64");
    if (contentMd5 !== undefined && contentMd5 !== md5Base64) {
      throw new S3Error("BadDigest", "The Content-MD5 you specified did not match what we received.", 400);
    }
    const sha256 = header(headers, "x-amz-content-sha256");
    if (sha256 !== undefined && /^[0-9a-f]{64}$/.test(sha256)) {
      if (createHash("sha256").update(data).digest("hex") !== sha256) {
        throw new S3Error(
          "XAmzContentSHA256Mismatch",
          "The provided 'x-amz-content-sha256' header does not match what was computed.",
          400,
        );
      }
    }
    const checksum = sentChecksum(headers, trailers);
    if (checksum !== undefined && checksumOf(checksum.algorithm, data) !== checksum.value) {
      throw new S3Error(
        "BadDigest",
        `The ${checksum.algorithm.toUpperCase()} you specified did not match the calculated checksum.`,
        400,
      );
    }
    const metadata: Record<string, string> = {};
    for (const [name, value] of Object.entries(headers)) {
      if (name.startsWith("x-amz-meta-") && typeof value === "string") metadata[name] = value;
    }
    const stored: StoredObject = {
      data,
      etag: `"${md5.digest("hex")}"`,
      lastModified: new Date(Math.floor(Date.now() / 1000) * 1000),
      contentType: header(headers, "content-type") ?? "binary/octet-stream",
      metadata,
      checksum,
    };
    objects.set(key, stored);
    return {
      status: 200,
      headers: {
        etag: stored.etag,
        "x-amz-server-side-encryption": header(headers, "x-amz-server-side-encryption") ?? "AES256",
        ...(checksum === undefined
          ? {}
          : {
              [`x-amz-checksum-${checksum.algorithm}`]: checksum.value,
              "x-amz-checksum-type": "FULL_OBJECT",
            }),
      },
    };
  }

  #get(bucket: string, key: string, request: S3Request): S3Answer {
    const stored = this.#bucket(bucket).get(key);
    if (stored === undefined) {
      throw new S3Error("NoSuchKey", "The specified key does not exist.", 404, { Key: key });
    }
    const headers: Record<string, string> = {
      "content-type": stored.contentType,
      "content-length": String(stored.data.length),
      etag: stored.etag,
      "last-modified": stored.lastModified.toUTCString(),
      "accept-ranges": "bytes",
      "x-amz-server-side-encryption": "AES256",
      ...stored.metadata,
    };
    if (header(request.headers, "x-amz-checksum-mode") === "ENABLED") {
      stored.checksum ??= { algorithm: "crc64nvme", value: checksumOf("crc64nvme", stored.data) };
      headers[`x-amz-checksum-${stored.checksum.algorithm}`] = stored.checksum.value;
      headers["x-amz-checksum-type"] = "FULL_OBJECT";
    }
    return { status: 200, headers, body: request.method === "HEAD" ? undefined : stored.data };
  }

  #bucket(bucket: string): Map<string, StoredObject> {
    const objects = this.#buckets.get(bucket);
    if (objects === undefined) {
      throw new S3Error("NoSuchBucket", "The specified bucket does not exist", 404, { BucketName: bucket });
    }
    return objects;
  }
}

/**
 * The bucket and key a request names: path-style (`/bucket`, `/bucket/`, `/bucket/key`, the key URI-encoded with
 * `/` kept), or virtual-hosted on a loopback name (`<bucket>.localhost:<port>/key`), which is how the SDK
 * addresses a bucket when the endpoint is a host name rather than an IP and forcePathStyle is off.
 */
function locate(
  url: string,
  host: string | undefined,
): {
  bucket: string | undefined;
  key: string | undefined;
  query: URLSearchParams;
} {
  const q = url.indexOf("?");
  const path = q === -1 ? url : url.slice(0, q);
  const query = new URLSearchParams(q === -1 ? "" : url.slice(q + 1));
  const virtual = /^(.+)\.localhost$/.exec((host ?? "").replace(/:\d+$/, ""))?.[1];
  if (virtual !== undefined) {
    return { bucket: virtual, key: path.length > 1 ? decodeURIComponent(path.slice(1)) : undefined, query };
  }
  const slash = path.indexOf("/", 1);
  const bucket = decodeURIComponent(slash === -1 ? path.slice(1) : path.slice(1, slash));
  const key =
    slash === -1 || slash === path.length - 1 ? undefined : decodeURIComponent(path.slice(slash + 1));
  return { bucket: bucket === "" ? undefined : bucket, key, query };
}

/** Amazon S3 User Guide, "General purpose bucket naming rules". */
function checkBucketName(bucket: string): void {
  if (
    !/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket) ||
    bucket.includes("..") ||
    /^\d+\.\d+\.\d+\.\d+$/.test(bucket)
  ) {
    throw new S3Error("InvalidBucketName", "The specified bucket is not valid.", 400, { BucketName: bucket });
  }
}

const header = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/** A stream body: the SDK sends it aws-chunked, the checksum in a trailer (`x-amz-trailer`). */
function isChunked(headers: IncomingHttpHeaders): boolean {
  return (
    (header(headers, "content-encoding") ?? "")
      .split(",")
      .some((coding) => coding.trim() === "aws-chunked") ||
    (header(headers, "x-amz-content-sha256") ?? "").startsWith("STREAMING-")
  );
}

/**
 * aws-chunked: `<hex size>[;chunk-signature=...]\r\n<bytes>\r\n` repeated, a zero-size chunk, then trailer
 * lines `name:value\r\n` and an empty line (Amazon S3 API Reference, "Signature Calculations for the
 * Authorization Header: Transferring Payload in Multiple Chunks").
 */
function decodeChunked(body: Buffer): { data: Buffer; trailers: Record<string, string> } {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = body.indexOf("\r\n", at);
    if (eol === -1) throw incomplete();
    const size = Number.parseInt(body.subarray(at, eol).toString("latin1").split(";")[0] ?? "", 16);
    if (!Number.isInteger(size) || size < 0) throw incomplete();
    at = eol + 2;
    if (size === 0) break;
    if (at + size > body.length) throw incomplete();
    parts.push(body.subarray(at, at + size));
    at += size + 2;
  }
  const trailers: Record<string, string> = {};
  for (const line of body.subarray(at).toString("latin1").split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon > 0) trailers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { data: Buffer.concat(parts), trailers };
}

function incomplete(): S3Error {
  return new S3Error("IncompleteBody", "The request body terminated unexpectedly", 400);
}

function sentChecksum(
  headers: IncomingHttpHeaders,
  trailers: Record<string, string>,
): StoredObject["checksum"] {
  for (const algorithm of CHECKSUM_ALGORITHMS) {
    const name = `x-amz-checksum-${algorithm}`;
    const value = trailers[name] ?? header(headers, name);
    if (value !== undefined) return { algorithm, value };
  }
  return undefined;
}

function notImplemented(what: string): S3Error {
  return new S3Error("NotImplemented", `This local endpoint does not implement ${what}.`, 501);
}

/** S3's error document (no body for HEAD, as S3 sends none); the SDK reads Error/Code. */
export function writeS3Error(res: ServerResponse, method: string, error: S3Error | ServiceError): void {
  const extra = error instanceof S3Error ? error.extra : {};
  const requestId = randomUUID();
  const fields = Object.entries({ Code: error.code, Message: error.message, ...extra, RequestId: requestId })
    .map(([name, value]) => `<${name}>${escapeXml(value)}</${name}>`)
    .join("");
  const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<Error>${fields}</Error>`;
  writeS3Answer(
    res,
    method,
    { status: error.status, headers: { "content-type": "application/xml" }, body: xml },
    requestId,
  );
}

export function writeS3Answer(
  res: ServerResponse,
  method: string,
  answer: S3Answer,
  requestId = randomUUID(),
): void {
  if (res.destroyed || res.headersSent) return;
  const body = answer.body === undefined ? undefined : Buffer.from(answer.body);
  res.writeHead(answer.status, {
    "x-amz-request-id": requestId,
    "x-amz-id-2": requestId,
    ...answer.headers,
    ...(method === "HEAD" || body === undefined
      ? answer.headers["content-length"] === undefined
        ? { "content-length": "0" }
        : {}
      : { "content-length": String(body.length) }),
  });
  res.end(method === "HEAD" ? undefined : body);
}

const escapeXml = (text: string) =>
  text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll('"', "&quot;");
