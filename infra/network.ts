import * as ec2 from "aws-cdk-lib/aws-ec2";
import type { Construct } from "constructs";

export interface NetworkProps {
  vpc: ec2.IVpc;
  securityGroups?: ec2.ISecurityGroup[] | undefined;
  connections?: ec2.IConnectable | undefined;
  vpcEndpoints?: ec2.IConnectable[] | undefined;
}

/**
 * The Lambdas' security groups and the paths they need: the database's port, and HTTPS to SQS and Secrets
 * Manager. With interface endpoints given, HTTPS goes to those endpoints' security groups only (nothing else in
 * or out of the VPC is reachable); without, to any address on 443 (a NAT gateway's route to the public APIs).
 */
export function functionSecurityGroups(scope: Construct, props: NetworkProps): ec2.ISecurityGroup[] {
  const endpoints = props.vpcEndpoints ?? [];
  let groups: ec2.ISecurityGroup[];
  if (props.securityGroups !== undefined && props.securityGroups.length > 0) {
    groups = props.securityGroups;
  } else {
    const sg = new ec2.SecurityGroup(scope, "FunctionsSecurityGroup", {
      vpc: props.vpc,
      description: "Outbox relay, purge and migration Lambdas",
      // Egress is listed, not open: the rules below and the database port, which `connections` adds on both
      // sides.
      allowAllOutbound: false,
    });
    if (endpoints.length === 0) {
      sg.addEgressRule(
        ec2.Peer.anyIpv4(),
        ec2.Port.tcp(443),
        "HTTPS to SQS and Secrets Manager (through NAT)",
      );
    } else {
      denyUnlistedEgress(sg);
    }
    groups = [sg];
  }
  for (const group of groups) {
    // Ingress on the endpoint's group and, for a group created here, the matching egress rule on ours.
    for (const endpoint of endpoints) {
      endpoint.connections.allowDefaultPortFrom(group, "Outbox Lambdas to the AWS API endpoint");
    }
    props.connections?.connections.allowDefaultPortFrom(group, "Outbox relay Lambdas to the database");
  }
  return groups;
}

/**
 * Keeps a security group's egress to its listed rules when every rule names another security group. Such rules
 * are separate AWS::EC2::SecurityGroupEgress resources; CDK then drops its "no traffic" placeholder from the
 * group's own SecurityGroupEgress, the property ends up empty, and EC2 gives a group created without egress
 * rules its default allow-all-outbound rule. The placeholder (ICMP type 252 code 86 to 255.255.255.255/32, which
 * matches nothing) keeps the property non-empty, so the default rule is never added.
 */
export function denyUnlistedEgress(group: ec2.SecurityGroup): void {
  (group.node.defaultChild as ec2.CfnSecurityGroup).addPropertyOverride("SecurityGroupEgress", [
    {
      CidrIp: "255.255.255.255/32",
      Description: "Disallow all traffic",
      IpProtocol: "icmp",
      FromPort: 252,
      ToPort: 86,
    },
  ]);
}

/** What withBusEndpoint reads of the database props. */
export interface BusEndpointProps {
  vpc: ec2.IVpc;
  vpcSubnets?: ec2.SubnetSelection | undefined;
  vpcEndpoints?: ec2.IConnectable[] | undefined;
  eventBridgeEndpoint?: ec2.IInterfaceVpcEndpoint | undefined;
}

/**
 * The interface endpoints the Lambdas' HTTPS goes to. A bus destination behind endpoints needs EventBridge's
 * too: the security group created here has no other HTTPS egress, so without one every PutEvents times out.
 */
export function withBusEndpoint(
  scope: Construct,
  db: BusEndpointProps,
  bus: boolean,
): ec2.IConnectable[] | undefined {
  const given = db.vpcEndpoints;
  if (db.eventBridgeEndpoint !== undefined && !bus) {
    throw new Error(
      "OutboxRelay database.eventBridgeEndpoint applies only to an EventBridge bus destination",
    );
  }
  if (!bus || given === undefined || given.length === 0) return given;
  const endpoint =
    db.eventBridgeEndpoint ??
    new ec2.InterfaceVpcEndpoint(scope, "EventBridgeEndpoint", {
      vpc: db.vpc,
      service: ec2.InterfaceVpcEndpointAwsService.EVENTBRIDGE,
      ...(db.vpcSubnets === undefined ? {} : { subnets: db.vpcSubnets }),
      privateDnsEnabled: true,
      // Only the Lambdas' security group is let in (functionSecurityGroups), not the VPC's CIDR.
      open: false,
    });
  return given.includes(endpoint) ? given : [...given, endpoint];
}
