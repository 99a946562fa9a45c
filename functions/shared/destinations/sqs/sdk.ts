import { onFirstUse } from "../../util/awsClient.ts";

/** The SQS SDK, when an SQS destination first sends or checks: importing the relay's entry point loads no SDK. */
export const sqsSdk = onFirstUse(() => import("./sdkExports.ts"));
