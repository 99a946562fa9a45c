/**
 * An error a fake service answers a whole request with: `code` is the service's error code (the JSON protocols'
 * `__type`, awsQuery's `Error/Code`), which the SDK maps to its modelled exception of that name.
 */
export class ServiceError extends Error {
  readonly code: string;
  readonly status: number;
  constructor(code: string, message: string, status = 400) {
    super(message);
    this.code = code;
    this.status = status;
  }
}
