import { GetObjectCommand, NoSuchKey, S3Client } from "@aws-sdk/client-s3";
import { ValidationError } from "../outbox/errors.ts";
import type { PayloadPointer } from "../outbox/payloadPointer.ts";
import { awsHttpOptions } from "../util/awsClient.ts";

/** Loaded by claimCheck.ts on the first pointer only; one client per container after that. */
let client: S3Client | undefined;

function s3(): S3Client {
  // An emulator's endpoint (moto, LocalStack) answers on one host: path-style addressing.
  const endpoint = process.env.AWS_ENDPOINT_URL_S3 ?? process.env.AWS_ENDPOINT_URL;
  client ??= new S3Client({
    requestHandler: awsHttpOptions({ requestTimeoutMs: 30_000 }),
    forcePathStyle: endpoint !== undefined,
  });
  return client;
}

/** GetObject of a payload: its text, or a ValidationError when the object is gone; other failures as they are. */
export async function fetchPayloadFromS3(pointer: PayloadPointer): Promise<string> {
  try {
    const response = await s3().send(
      new GetObjectCommand({ Bucket: pointer.s3BucketName, Key: pointer.s3Key }),
    );
    if (response.Body === undefined) throw new Error("GetObject returned no body");
    return await response.Body.transformToString("utf8");
  } catch (error) {
    if (error instanceof NoSuchKey || (error as { name?: string }).name === "NoSuchKey") {
      throw new ValidationError(
        "payload",
        `points to s3://${pointer.s3BucketName}/${pointer.s3Key}, which does not exist (expired by the bucket's ` +
          "lifecycle rule or deleted); the event cannot be applied",
        { cause: error },
      );
    }
    throw error;
  }
}
