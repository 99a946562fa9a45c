import { Lazy, Stack, Validations } from "aws-cdk-lib";
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
 *
 * The property is rendered at synth from the group's own inline rules (an address rule such as the S3 gateway
 * endpoint's HTTPS, added before or after this call), the placeholder only when there are none: a fixed override
 * would replace the whole property and silently drop every inline rule.
 */
export function denyUnlistedEgress(group: ec2.SecurityGroup): void {
  const cfn = group.node.defaultChild as ec2.CfnSecurityGroup;
  const listed: unknown = cfn.securityGroupEgress;
  cfn.addPropertyOverride(
    "SecurityGroupEgress",
    Lazy.any({
      produce: () => {
        const rules = (Stack.of(group).resolve(listed) ?? []) as Record<string, unknown>[];
        const inline = rules
          .map(cloudFormationRule)
          .filter((rule) => rule.CidrIp !== NO_TRAFFIC.CidrIp || rule.IpProtocol !== NO_TRAFFIC.IpProtocol);
        return inline.length > 0 ? inline : [NO_TRAFFIC];
      },
    }),
  );
}

const NO_TRAFFIC = {
  CidrIp: "255.255.255.255/32",
  Description: "Disallow all traffic",
  IpProtocol: "icmp",
  FromPort: 252,
  ToPort: 86,
};

/** CDK keeps inline rules in the L1's property names (`cidrIp`); the template's are capitalized (`CidrIp`). */
function cloudFormationRule(rule: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(rule).map(([key, value]) => [`${key.charAt(0).toUpperCase()}${key.slice(1)}`, value]),
  );
}

/**
 * What the construct may create in the VPC for the Lambdas' paths to AWS (OutboxDatabaseProps.createEndpoints):
 * - `openToVpc`: a missing interface endpoint is created with private DNS and admits the VPC's CIDR on 443, as AWS
 *   Solutions Constructs make theirs, so every workload of the VPC keeps reaching that service; with
 *   `largePayloads`, an S3 gateway endpoint on the Lambdas' route tables unless the app has one.
 * - `functionsOnly`: the same, but the interface endpoints admit the Lambdas' security groups only. Private DNS
 *   answers for the service's hostname in the whole VPC, so any other workload that reached it through NAT times
 *   out: for a VPC nothing else uses.
 * - `none`: nothing is created. Behind `vpcEndpoints`, a service the destinations use without an endpoint given
 *   fails synth naming it; S3 needs the VPC's own route (its gateway endpoint, or NAT).
 * Default `openToVpc` for a VPC this app creates, `none` for an imported one: creating there changes the network
 * of workloads the app does not own (a second S3 gateway endpoint on a route table fails to create; a first one
 * reroutes every S3 request of the subnets using that table).
 */
export type CreateEndpoints = "openToVpc" | "functionsOnly" | "none";

export function createEndpointsOf(db: { vpc: ec2.IVpc; createEndpoints?: CreateEndpoints | undefined }) {
  return db.createEndpoints ?? (db.vpc instanceof ec2.Vpc ? "openToVpc" : "none");
}

/** What withServiceEndpoints reads of the database props. */
export interface ServiceEndpointProps {
  vpc: ec2.IVpc;
  vpcSubnets?: ec2.SubnetSelection | undefined;
  vpcEndpoints?: ec2.IConnectable[] | undefined;
  eventBridgeEndpoint?: ec2.IInterfaceVpcEndpoint | undefined;
  routeEndpoints?: Partial<Record<EndpointService, ec2.IInterfaceVpcEndpoint>> | undefined;
  createEndpoints?: CreateEndpoints | undefined;
}

/** The AWS APIs the relay publishes through, by their interface endpoint service. */
export type EndpointService = "sqs" | "sns" | "kinesis" | "events";

const ENDPOINT_SERVICES: Record<EndpointService, ec2.InterfaceVpcEndpointAwsService> = {
  sqs: ec2.InterfaceVpcEndpointAwsService.SQS,
  sns: ec2.InterfaceVpcEndpointAwsService.SNS,
  kinesis: ec2.InterfaceVpcEndpointAwsService.KINESIS_STREAMS,
  events: ec2.InterfaceVpcEndpointAwsService.EVENTBRIDGE,
};

const ENDPOINT_IDS: Record<EndpointService, string> = {
  sqs: "SqsEndpoint",
  sns: "SnsEndpoint",
  kinesis: "KinesisEndpoint",
  events: "EventBridgeEndpoint",
};

/**
 * The interface endpoints the Lambdas' HTTPS goes to. Behind endpoints, the security group created here has no
 * other HTTPS egress, so every service the relay publishes to needs its own endpoint, or each request times out:
 * for each of `services`, the one given (`routeEndpoints`, `eventBridgeEndpoint`, or one of `vpcEndpoints` this
 * app made for that service), else one created here as `createEndpoints` says, else a synth error naming it. A
 * VPC cannot hold two endpoints of one service with private DNS, so give yours if the VPC has one already.
 */
export function withServiceEndpoints(
  scope: Construct,
  db: ServiceEndpointProps,
  services: ReadonlySet<EndpointService>,
): ec2.IConnectable[] | undefined {
  const given = db.vpcEndpoints;
  if (db.eventBridgeEndpoint !== undefined && !services.has("events")) {
    throw new Error(
      "OutboxRelay database.eventBridgeEndpoint applies only to an EventBridge bus destination or route",
    );
  }
  for (const service of Object.keys(db.routeEndpoints ?? {}) as EndpointService[]) {
    if (!services.has(service)) {
      throw new Error(`OutboxRelay database.routeEndpoints.${service}: no destination uses ${service}`);
    }
  }
  if (given === undefined || given.length === 0) return given;
  const create = createEndpointsOf(db);
  const endpoints = [...given];
  for (const service of services) {
    const aws = ENDPOINT_SERVICES[service];
    const endpoint =
      db.routeEndpoints?.[service] ??
      (service === "events" ? db.eventBridgeEndpoint : undefined) ??
      given.find((one) => isEndpointOf(one, aws)) ??
      createdEndpoint(scope, db, service, create);
    if (!endpoints.includes(endpoint)) endpoints.push(endpoint);
  }
  return endpoints;
}

function createdEndpoint(
  scope: Construct,
  db: ServiceEndpointProps,
  service: EndpointService,
  create: CreateEndpoints,
): ec2.InterfaceVpcEndpoint {
  if (create === "none") {
    const prop =
      service === "events" ? "eventBridgeEndpoint or routeEndpoints.events" : `routeEndpoints.${service}`;
    throw new Error(
      `OutboxRelay database.vpcEndpoints: a destination publishes to ${service}, and no ${service} endpoint is ` +
        `given; give yours (database.${prop}), or let the construct create one (database.createEndpoints ` +
        '"openToVpc", or "functionsOnly" in a VPC nothing else uses: docs/deploy.md, "VPC endpoints")',
    );
  }
  const endpoint = new ec2.InterfaceVpcEndpoint(scope, ENDPOINT_IDS[service], {
    vpc: db.vpc,
    service: ENDPOINT_SERVICES[service],
    ...(db.vpcSubnets === undefined ? {} : { subnets: db.vpcSubnets }),
    privateDnsEnabled: true,
    // The Lambdas' security group is let in either way (functionSecurityGroups).
    open: false,
  });
  if (create === "openToVpc") {
    // Private DNS sends the whole VPC's requests for this service here: the VPC's CIDR keeps them working.
    endpoint.connections.allowFrom(
      ec2.Peer.ipv4(vpcCidr(db.vpc)),
      endpoint.connections.defaultPort ?? ec2.Port.tcp(443),
      "The VPC's workloads, whose requests private DNS sends here",
    );
    Validations.of(endpoint).acknowledge({
      id: "AwsSolutions-EC23",
      reason:
        "The endpoint admits the VPC's own CIDR on 443 (not 0.0.0.0/0): private DNS sends every request of the VPC " +
        "for this service here, so the VPC's other workloads must keep reaching it (AWS Solutions Constructs' choice).",
    });
  }
  return endpoint;
}

function vpcCidr(vpc: ec2.IVpc): string {
  try {
    return vpc.vpcCidrBlock;
  } catch (cause) {
    throw new Error(
      'OutboxRelay database.createEndpoints "openToVpc" opens the created endpoints to the VPC\'s CIDR, which ' +
        "the imported VPC does not carry: import it with vpcCidrBlock, or give the endpoints",
      { cause },
    );
  }
}

/** Whether `endpoint` is an interface endpoint of this app for `service` (its template names the service). */
export function isEndpointOf(
  endpoint: ec2.IConnectable,
  service: ec2.InterfaceVpcEndpointAwsService,
): boolean {
  if (!(endpoint instanceof ec2.InterfaceVpcEndpoint)) return false;
  const cfn = endpoint.node.defaultChild as ec2.CfnVPCEndpoint;
  // `com.amazonaws.<region>.<short name><suffix>`, the suffix a token (empty but in China's partition).
  const name = (cfn.serviceName ?? "").replace(/\$\{Token\[[^\]]*\]\}$/, "");
  return name.endsWith(`.${service.shortName}`);
}
