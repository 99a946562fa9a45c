import { startFakeSqs } from "../../cli/dev/aws/fakeSqs.ts";
import { claimCheckSuite } from "../support/claimCheckSuite.ts";

/** The claim check end to end against the in-process endpoint `outbox dev` runs (its S3 and SQS). */
claimCheckSuite("the in-process endpoint", () => startFakeSqs());
