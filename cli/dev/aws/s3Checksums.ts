/**
 * The whole-object checksums S3 verifies on upload and returns on download (Amazon S3 User Guide, "Checking
 * object integrity"): CRC32, CRC32C, CRC64NVME, SHA1, SHA256, each base64 of the big-endian digest, as the SDK
 * sends them in `x-amz-checksum-<algorithm>` (a header, or an aws-chunked trailer for a stream body). The SDK v3
 * sends CRC32 on every PutObject by default and validates what GetObject returns with `x-amz-checksum-mode`.
 */
import { createHash } from "node:crypto";
import { crc32 } from "node:zlib";

export const CHECKSUM_ALGORITHMS = ["crc32", "crc32c", "crc64nvme", "sha1", "sha256"] as const;
export type ChecksumAlgorithm = (typeof CHECKSUM_ALGORITHMS)[number];

/** The base64 checksum of `data` with `algorithm`, as S3 writes it in `x-amz-checksum-<algorithm>`. */
export function checksumOf(algorithm: ChecksumAlgorithm, data: Buffer): string {
  switch (algorithm) {
    case "crc32":
      return uint32(crc32(data));
    case "crc32c":
      return uint32(crc32c(data));
    case "crc64nvme":
      return crc64nvme(data);
    case "sha1":
    case "sha256":
      return createHash(algorithm).update(data).digest("base64");
  }
}

function uint32(value: number): string {
  const bytes = Buffer.allocUnsafe(4);
  bytes.writeUInt32BE(value >>> 0);
  return bytes.toString("base64");
}

/** A reflected CRC's byte table for `polynomial` (reflected form). */
function table32(polynomial: number): Uint32Array {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ polynomial : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
}

let castagnoli: Uint32Array | undefined;

/** CRC-32C (Castagnoli, reflected polynomial 0x82F63B78). */
function crc32c(data: Buffer): number {
  castagnoli ??= table32(0x82f63b78);
  let crc = 0xffffffff;
  for (const byte of data) crc = (crc >>> 8) ^ (castagnoli[(crc ^ byte) & 0xff] as number);
  return (crc ^ 0xffffffff) >>> 0;
}

let nvme: { hi: Uint32Array; lo: Uint32Array } | undefined;

/**
 * CRC-64/NVME (polynomial 0xAD93D23594C93659, reflected 0x9A6C9329AC4BC9B5; init and xorout all ones), the one
 * S3 computes for an object uploaded without a checksum. In two 32-bit halves: a BigInt per byte is far slower.
 */
function crc64nvme(data: Buffer): string {
  if (nvme === undefined) {
    const hi = new Uint32Array(256);
    const lo = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let h = 0;
      let l = n;
      for (let k = 0; k < 8; k++) {
        const carry = l & 1;
        l = ((l >>> 1) | ((h & 1) << 31)) >>> 0;
        h >>>= 1;
        if (carry) {
          h = (h ^ 0x9a6c9329) >>> 0;
          l = (l ^ 0xac4bc9b5) >>> 0;
        }
      }
      hi[n] = h;
      lo[n] = l;
    }
    nvme = { hi, lo };
  }
  const { hi, lo } = nvme;
  let h = 0xffffffff;
  let l = 0xffffffff;
  for (const byte of data) {
    const index = (l ^ byte) & 0xff;
    l = (((l >>> 8) | ((h & 0xff) << 24)) ^ (lo[index] as number)) >>> 0;
    h = ((h >>> 8) ^ (hi[index] as number)) >>> 0;
  }
  const bytes = Buffer.allocUnsafe(8);
  bytes.writeUInt32BE((h ^ 0xffffffff) >>> 0, 0);
  bytes.writeUInt32BE((l ^ 0xffffffff) >>> 0, 4);
  return bytes.toString("base64");
}
