import { onFirstUse } from "../../util/awsClient.ts";

/**
 * The SNS SDK, when an SNS destination first sends or checks: the limits in sns.ts are read by the route parser and
 * the construct, which need no client.
 */
export const snsSdk = onFirstUse(() => import("./sdkExports.ts"));
