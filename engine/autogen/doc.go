// Package autogen derives the rules Kyverno generates for Pod controllers
// from a policy's Pod rules.
//
// A rule that matches Pods also applies to the controllers that create Pods
// from a template: Deployment, DaemonSet, StatefulSet, Job, ReplicaSet and
// ReplicationController (template under spec.template) get a rule named
// autogen-<rule>, CronJob (template under spec.jobTemplate.spec.template) gets
// autogen-cronjob-<rule>. Eligibility, the controllers annotation, the
// rewriting of patterns, patches and variables, and the order of the generated
// rules follow Kyverno's autogen v1 (see ../../../shared/spec/
// validate-semantics.md §9 and mutate-generate-semantics.md §7).
//
// The CEL kinds (ValidatingPolicy, MutatingPolicy, ImageValidatingPolicy)
// get copies of their whole spec instead, one for the template controllers
// and one for CronJob (celpolicies.go, cel-policy-types.md §3.5), which
// the engine compiles, the webhooks register and status.autogen.configs
// publishes (Configs).
//
// The package is pure: it never changes the policy it is given. charter
// publishes the generated rules in the policy's status, never in its spec.
//
// The transformation works on the JSON form of the rules, as Kyverno's does:
// the variable rewrite (request.object.spec -> request.object.spec.template.spec)
// is a textual replacement over the rule's JSON encoding, quirks included.
package autogen
