import type * as ec2 from "aws-cdk-lib/aws-ec2";
import type * as kms from "aws-cdk-lib/aws-kms";
import type * as rds from "aws-cdk-lib/aws-rds";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import type { Construct, IDependable } from "constructs";

/** The database as the user has it: a cluster or an instance (created in the app or imported), or its parts. */
export interface DatabaseAsGiven {
  cluster?: rds.IDatabaseCluster | undefined;
  instance?: rds.IDatabaseInstance | undefined;
  secret?: secretsmanager.ISecret | undefined;
  connections?: ec2.IConnectable | undefined;
  readiness?: IDependable[] | undefined;
}

/** What the construct needs from it. */
export interface ResolvedDatabase {
  secret: secretsmanager.ISecret;
  /** Whose default port the Lambdas (and `grantEnqueue` callers) are let into; none when the user manages that. */
  connections?: ec2.IConnectable | undefined;
  readiness: IDependable[];
}

/**
 * One description of the database from the props: `cluster` or `instance` stand for their secret (a created
 * one's generated secret, or the `secret` attribute of an imported one), their security groups and port, and
 * their readiness (a cluster created in the same app includes its instances); explicit props win.
 */
export function resolveDatabase(given: DatabaseAsGiven): ResolvedDatabase {
  if (given.cluster !== undefined && given.instance !== undefined) {
    throw new Error("OutboxRelay database: give either `cluster` or `instance`, not both");
  }
  const database = given.cluster ?? given.instance;
  if (database !== undefined && given.connections !== undefined) {
    throw new Error(
      "OutboxRelay database: `connections` is for a database given by its security groups; with `cluster` or " +
        "`instance` the construct uses theirs",
    );
  }
  const secret = given.secret ?? attachedSecret(database);
  if (secret === undefined) {
    throw new Error(
      "OutboxRelay database.secret is required: the Secrets Manager secret with the database's credentials (RDS " +
        "format: username, password, host, port, dbname), e.g. Secret.fromSecretCompleteArn(...). An imported " +
        "cluster or instance carries one only when its attributes name it.",
    );
  }
  return {
    secret,
    connections: database ?? given.connections,
    readiness: given.readiness ?? (database === undefined ? [] : [database]),
  };
}

/**
 * The database with its secret's customer managed key (`database.secretEncryptionKey`): the same secret, seen with
 * its key, so every grant of it (grantSecretRead: kms:Decrypt via Secrets Manager) and the logins' rotations (CDK
 * passes the master secret's key to AWS's rotation application as masterSecretKmsKeyArn) include the key. Without
 * it the migrations' custom resource fails the first deploy with KMS AccessDenied.
 */
export function withSecretKey(
  scope: Construct,
  database: ResolvedDatabase,
  key: kms.IKey | undefined,
): ResolvedDatabase {
  if (key === undefined) return database;
  const { secret } = database;
  if (secret.encryptionKey !== undefined && secret.encryptionKey !== key) {
    throw new Error(
      "OutboxRelay database.secretEncryptionKey: the secret already names its encryption key; give it once, " +
        "either on the secret (Secret.fromSecretAttributes) or here",
    );
  }
  const keyed = secretsmanager.Secret.fromSecretAttributes(scope, "DatabaseSecretWithKey", {
    ...(secret.secretFullArn === undefined
      ? { secretPartialArn: secret.secretArn }
      : { secretCompleteArn: secret.secretFullArn }),
    encryptionKey: key,
  });
  return { ...database, secret: keyed };
}

function attachedSecret(
  database: rds.IDatabaseCluster | rds.IDatabaseInstance | undefined,
): secretsmanager.ISecret | undefined {
  // DatabaseCluster, DatabaseInstance and their imported forms have `secret`; the interfaces do not declare it.
  return (database as { secret?: secretsmanager.ISecret } | undefined)?.secret;
}
