/**
 * What the relay accepts as a queue URL: a scheme, a host and a path, the shape of
 * `https://sqs.<region>.amazonaws.com/<account>/<name>.fifo` and of an emulator's (`http://localhost:4566/...`).
 * Only the shape: whether the queue exists and is FIFO is asked of SQS itself (queueCheck.ts).
 */
export const QUEUE_URL = /^https?:\/\/[^/\s]+\/\S+$/;

export function isQueueUrl(value: string): boolean {
  return QUEUE_URL.test(value);
}
