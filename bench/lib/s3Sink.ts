import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * The least of S3's REST protocol the claim check's PutObject needs: any PUT is read to its end and answered
 * 200 with an ETag, the body discarded (counted). For the memory bench: the relay's side is what is measured, so
 * the store must be fast and hold nothing (moto took ~5 s per 40 MiB object and keeps every byte).
 */
export async function startS3Sink(): Promise<{ url: string; bytes(): number; close(): Promise<void> }> {
  let received = 0;
  const server = createServer((request, response) => {
    request.on("data", (chunk: Buffer) => {
      received += chunk.length;
    });
    request.on("end", () => {
      response.writeHead(200, { ETag: '"sink"', "Content-Length": "0" });
      response.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    bytes: () => received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
