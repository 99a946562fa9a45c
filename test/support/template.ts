import type { Template } from "aws-cdk-lib/assertions";
import { AwsSolutionsChecks } from "cdk-nag";
import type { IConstruct } from "constructs";

export type Resource = { Type: string; Properties?: Record<string, unknown>; DependsOn?: string[] };

export function resources(template: Template, type: string): [string, Resource][] {
  return Object.entries(template.findResources(type) as Record<string, Resource>);
}

/** Every statement of every identity policy (inline in roles, or AWS::IAM::Policy), with where it came from. */
export function identityStatements(template: Template) {
  const statements: { source: string; statement: Record<string, unknown> }[] = [];
  for (const [id, policy] of resources(template, "AWS::IAM::Policy")) {
    const doc = policy.Properties?.PolicyDocument as { Statement: Record<string, unknown>[] };
    for (const statement of doc.Statement) statements.push({ source: id, statement });
  }
  for (const [id, role] of resources(template, "AWS::IAM::Role")) {
    for (const inline of (role.Properties?.Policies ?? []) as {
      PolicyDocument: { Statement: Record<string, unknown>[] };
    }[]) {
      for (const statement of inline.PolicyDocument.Statement) statements.push({ source: id, statement });
    }
  }
  return statements;
}

export function asArray<T>(value: T | T[]): T[] {
  return Array.isArray(value) ? value : [value];
}

/** cdk-nag's findings (AwsSolutions), acknowledgements honoured. */
export function nagFindings(scope: IConstruct): string[] {
  return new AwsSolutionsChecks(undefined, { verbose: true })
    .validateScope(scope)
    .violations.flatMap((v) =>
      v.violatingResources.map(
        (r) => `${v.ruleName} (${v.severity}) at ${r.constructPath}: ${v.description}`,
      ),
    );
}
