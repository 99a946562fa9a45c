/**
 * The account and region every in-process fake lives in (queue URLs and ARNs, bus and rule ARNs, SenderId, an
 * event's `account` and `region`). One place, so the SQS and EventBridge halves of the endpoint agree.
 */
export const ACCOUNT = "000000000000";
export const REGION = "us-east-1";
