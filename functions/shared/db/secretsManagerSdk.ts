// What the pools use of the Secrets Manager SDK, loaded on first use by connection.ts (named re-exports keep the
// bundle to these: see ../destinations/sqs/sdkExports.ts).
export { GetSecretValueCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
