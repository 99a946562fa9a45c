import { ArnFormat, Duration, RemovalPolicy, Stack } from "aws-cdk-lib";
import type * as cloudwatch from "aws-cdk-lib/aws-cloudwatch";
import * as cloudwatchActions from "aws-cdk-lib/aws-cloudwatch-actions";
import * as iam from "aws-cdk-lib/aws-iam";
import * as kms from "aws-cdk-lib/aws-kms";
import * as sns from "aws-cdk-lib/aws-sns";
import type { Construct } from "constructs";

/** The alarm props that choose the topic (OutboxAlarmProps in outboxRelay.ts). */
export interface AlarmTopicProps {
  topic?: sns.ITopic | undefined;
  createTopic?: boolean | undefined;
}

/** The topic the alarms notify: the one given, one created here (`createTopic`), or none. */
export function alarmTopic(scope: Construct, props: AlarmTopicProps): sns.ITopic | undefined {
  if (props.topic !== undefined) return props.topic;
  if (props.createTopic !== true) return undefined;
  // CloudWatch can publish to an encrypted topic only if it may use the key: the AWS-managed aws/sns key
  // cannot grant that, so the topic gets a key of its own.
  const key = new kms.Key(scope, "AlarmTopicKey", {
    description: "Encrypts the outbox alarm topic",
    enableKeyRotation: true,
    // Deleted with the stack (after KMS's shortest waiting period), whatever the construct's removal policy: it
    // encrypts notifications in flight only, nothing that outlives the topic, which goes with the stack. A
    // retained key costs $1 a month for each stack ever destroyed.
    removalPolicy: RemovalPolicy.DESTROY,
    pendingWindow: Duration.days(7),
  });
  key.addToResourcePolicy(
    new iam.PolicyStatement({
      sid: "AllowCloudWatchAlarmsToPublish",
      principals: [new iam.ServicePrincipal("cloudwatch.amazonaws.com")],
      actions: ["kms:Decrypt", "kms:GenerateDataKey*"],
      // In a key policy "*" means this key; AWS accepts nothing else there.
      resources: ["*"],
      conditions: { StringEquals: { "aws:SourceAccount": Stack.of(scope).account } },
    }),
  );
  const topic = new sns.Topic(scope, "AlarmTopic", {
    displayName: "Outbox relay alarms",
    masterKey: key,
    enforceSSL: true,
  });
  // A topic policy replaces SNS's default one, which let the account's own principals publish: with only the
  // TLS Deny above, nothing allows CloudWatch and every alarm notification is dropped. The Allow is AWS's own
  // (SNS developer guide, "Amazon SNS access control: use cases", CloudWatch alarms publishing to a topic):
  // the cloudwatch.amazonaws.com principal, held to this account's alarms by aws:SourceAccount and
  // aws:SourceArn so no other account's alarm can use the topic (the confused-deputy guard).
  const stack = Stack.of(scope);
  topic.addToResourcePolicy(
    new iam.PolicyStatement({
      sid: "AllowCloudWatchAlarmsToPublish",
      principals: [new iam.ServicePrincipal("cloudwatch.amazonaws.com")],
      actions: ["sns:Publish"],
      resources: [topic.topicArn],
      conditions: {
        StringEquals: { "aws:SourceAccount": stack.account },
        ArnLike: {
          "aws:SourceArn": stack.formatArn({
            service: "cloudwatch",
            resource: "alarm",
            resourceName: "*",
            arnFormat: ArnFormat.COLON_RESOURCE_NAME,
          }),
        },
      },
    }),
  );
  return topic;
}

/** ALARM and OK of each alarm go to the topic, when there is one. */
export function notifyTopic(topic: sns.ITopic | undefined, alarms: Record<string, cloudwatch.Alarm>): void {
  if (topic === undefined) return;
  const action = new cloudwatchActions.SnsAction(topic);
  for (const alarm of Object.values(alarms)) {
    alarm.addAlarmAction(action);
    alarm.addOkAction(action);
  }
}
