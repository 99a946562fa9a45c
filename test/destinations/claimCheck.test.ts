import { inject } from "vitest";
import { claimCheckSuite } from "../support/claimCheckSuite.ts";

/** The claim check end to end against the harness's AWS endpoint (moto, or LocalStack where Docker answers). */
claimCheckSuite("the harness's AWS endpoint", async () => ({
  url: inject("awsEndpoint"),
  close: async () => {},
}));
