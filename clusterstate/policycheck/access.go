package policycheck

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/variables"
)

// Access answers whether an identity may do what attrs say: a
// SubjectAccessReview for another identity, a SelfSubjectAccessReview for
// this process's own (webhook/status SubjectAccess and SelfAccess are
// both one); reason is the authorizer's, often empty.
type Access interface {
	Allowed(ctx context.Context, attrs authorizationv1.ResourceAttributes) (allowed bool, reason string, err error)
}

// Writer is the identity that carries out a ClusterPolicy's generate and
// mutate-existing rules: charter's background controller.
type Writer struct {
	// User names it in a refusal, as Kyverno names its background
	// controller's ServiceAccount
	// ("system:serviceaccount:charter:charter-background").
	User   string
	Access Access
}

// writerCheckTimeout bounds the SubjectAccessReviews of one policy.
const writerCheckTimeout = 10 * time.Second

// WriteFaults are the faults of a ClusterPolicy whose generate or
// mutate-existing rules name a kind its background controller may not
// write, as Kyverno's policy validation finds them (pkg/policy/generate
// and pkg/policy/mutate validateAuth, a SubjectAccessReview per verb):
//   - a generate rule needs get and create on its kind (each cloneList
//     kind) in its namespace, and update and delete too with synchronize:
//     refused at the rule's generate (or cloneList kind) field with
//     "<user> requires permissions get,create for resource v1/ConfigMap in
//     namespace team";
//   - a mutate-existing target needs get and update: refused at the
//     target with "auth check fails, additional privileges are required
//     for the service account '<user>': ...".
//
// A kind, apiVersion, namespace or name with variables is asked without
// it (a kind with variables is not asked at all, as Kyverno skips it); so
// is a kind the cluster does not serve, which the background controller
// reports when the rule runs. Namespaced Policies are not asked: their
// writes are made as their namespace's charter-policy ServiceAccount,
// whose rights the background controller checks at run time
// (docs/policy-validation.md).
func WriteFaults(p *kyvernov1.ClusterPolicy, cluster Cluster, w *Writer) (fault.List, error) {
	ctx, cancel := context.WithTimeout(context.Background(), writerCheckTimeout)
	defer cancel()
	var faults fault.List
	add := func(field, what string) {
		faults = append(faults, &fault.Fault{Kind: kyvernov1.ClusterPolicyKind, Name: p.GetName(), Field: field, Fault: what})
	}
	for i, rule := range p.Spec.Rules {
		path := fmt.Sprintf("spec.rules[%d]", i)
		if g := rule.Generation; g != nil {
			verbs := []string{"get", "create"}
			if g.Synchronize {
				verbs = append(verbs, "update", "delete")
			}
			if err := w.generateFaults(ctx, cluster, path, g, verbs, add); err != nil {
				return nil, err
			}
		}
		if m := rule.Mutation; m != nil {
			for j, t := range m.Targets {
				msg, err := w.missing(ctx, cluster, []string{"get", "update"}, t.APIVersion, t.Kind, t.Namespace, t.Name)
				if err != nil {
					return nil, err
				}
				if msg != "" {
					add(fmt.Sprintf("%s.mutate.targets[%d]", path, j),
						fmt.Sprintf("auth check fails, additional privileges are required for the service account '%s': %s", w.User, msg))
				}
			}
		}
	}
	return faults, nil
}

// generateTarget is what a generate rule writes, with the field a
// refusal names: its generate (or a foreach entry's) kind, or one
// cloneList kind.
type generateTarget struct {
	path, apiVersion, kind, namespace, name string
}

// generateTargets are the targets of the generate rule at path: its own
// and each foreach entry's kind, or, for a cloneList, each of its kinds
// (in the pattern's namespace, any name).
func generateTargets(path string, g *kyvernov1.Generation) []generateTarget {
	patterns := []struct {
		path string
		p    kyvernov1.GeneratePattern
	}{{path + ".generate", g.GeneratePattern}}
	for j, fe := range g.ForEachGeneration {
		patterns = append(patterns, struct {
			path string
			p    kyvernov1.GeneratePattern
		}{fmt.Sprintf("%s.generate.foreach[%d]", path, j), fe.GeneratePattern})
	}
	var out []generateTarget
	for _, gp := range patterns {
		if len(gp.p.CloneList.Kinds) == 0 {
			out = append(out, generateTarget{gp.path, gp.p.APIVersion, gp.p.Kind, gp.p.Namespace, gp.p.Name})
			continue
		}
		for k, kind := range gp.p.CloneList.Kinds {
			apiVersion, kind := splitCloneKind(kind)
			out = append(out, generateTarget{fmt.Sprintf("%s.cloneList.kinds[%d]", gp.path, k), apiVersion, kind, gp.p.Namespace, ""})
		}
	}
	return out
}

// generateFaults asks whether w may do verbs on each target of the
// generate rule at path (generateTargets) and gives add Kyverno's message
// for each it may not.
func (w *Writer) generateFaults(ctx context.Context, cluster Cluster, path string, g *kyvernov1.Generation, verbs []string, add func(field, what string)) error {
	for _, t := range generateTargets(path, g) {
		msg, err := w.missing(ctx, cluster, verbs, t.apiVersion, t.kind, t.namespace, t.name)
		if err != nil {
			return err
		}
		if msg != "" {
			add(t.path, msg)
		}
	}
	return nil
}

// splitCloneKind splits a cloneList kind ("v1/Secret",
// "networking.k8s.io/v1/NetworkPolicy", "ConfigMap") into its apiVersion
// and kind.
func splitCloneKind(s string) (apiVersion, kind string) {
	if i := strings.LastIndex(s, "/"); i >= 0 {
		return s[:i], s[i+1:]
	}
	return "", s
}

// missing asks whether the writer may do each verb on the kind, in
// namespace, on name, and returns Kyverno's message naming the verbs it
// may not ("" when it may do them all, or when the kind cannot be asked
// about).
func (w *Writer) missing(ctx context.Context, cluster Cluster, verbs []string, apiVersion, kind, namespace, name string) (string, error) {
	t, ok, err := resolveTarget(cluster, apiVersion, kind, namespace, name)
	if err != nil || !ok {
		return "", err
	}
	failed, err := w.denied(ctx, t, verbs)
	if err != nil || len(failed) == 0 {
		return "", err
	}
	gvk := t.res.Kind
	if t.res.Version != "" {
		gvk = t.res.Version + "/" + gvk
	}
	if t.res.Group != "" {
		gvk = t.res.Group + "/" + gvk
	}
	if t.subresource != "" {
		gvk += "/" + t.subresource
	}
	msg := fmt.Sprintf("%s requires permissions %s for resource %s", w.User, strings.Join(failed, ","), gvk)
	if t.namespace != "" {
		msg += " in namespace " + t.namespace
	}
	return msg, nil
}

// target is the served resource a rule names, where it is asked about.
type target struct {
	res                          ServedKind
	subresource, namespace, name string
}

// resolveTarget finds the served resource of a kind (and apiVersion, when
// given). ok is false when it cannot be asked about: a kind or apiVersion
// with variables, or one the cluster does not serve. A namespace with
// variables, or of a cluster-scoped kind, is dropped (every namespace);
// so is a name with variables.
func resolveTarget(cluster Cluster, apiVersion, kind, namespace, name string) (target, bool, error) {
	if kind == "" || variables.IsVariable(kind) || variables.IsVariable(apiVersion) {
		return target{}, false, nil
	}
	sel := match.ParseKind(kind)
	var gv *schema.GroupVersion
	if apiVersion != "" {
		parsed, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			return target{}, false, nil // the compile check names a bad apiVersion
		}
		gv = &parsed
	}
	found, err := cluster.Resolve(sel)
	if err != nil {
		return target{}, false, err
	}
	var res ServedKind
	for _, k := range found {
		// A selector's empty group matches any group; the core group is
		// "" here.
		if k.Resource != "" && (gv == nil || k.Group == gv.Group && k.Version == gv.Version) {
			res = k
			break
		}
	}
	if res.Resource == "" {
		return target{}, false, nil
	}
	if variables.IsVariable(namespace) || !res.Namespaced {
		namespace = ""
	}
	if variables.IsVariable(name) {
		name = ""
	}
	return target{res: res, subresource: sel.SubResource, namespace: namespace, name: name}, true, nil
}

// denied asks about each verb on t and returns those w may not do.
func (w *Writer) denied(ctx context.Context, t target, verbs []string) ([]string, error) {
	var failed []string
	for _, verb := range verbs {
		ok, _, err := w.Access.Allowed(ctx, authorizationv1.ResourceAttributes{
			Verb: verb, Group: t.res.Group, Version: t.res.Version, Resource: t.res.Resource, Subresource: t.subresource,
			Namespace: t.namespace, Name: t.name})
		if err != nil {
			return nil, fmt.Errorf("asking whether %s may %s %s: %w", w.User, verb, t.res.Resource, err)
		}
		if !ok {
			failed = append(failed, verb)
		}
	}
	return failed, nil
}

// DeleteFaults are the faults of a ClusterCleanupPolicy whose match names
// a kind charter's cleanup controller (d) may not delete or list, as
// Kyverno's cleanup policy validation finds them
// (pkg/validation/cleanuppolicy validateAuth: a SubjectAccessReview for
// its cleanup controller per kind and name of each match filter, delete
// first, then list): refused at the kind's field with "cleanup controller
// has no permission to delete kind Pod" (or "to list kind Pod"). A kind
// with variables or one the cluster does not serve is not asked, as in
// WriteFaults. A namespaced CleanupPolicy is not asked: charter deletes
// for it as its namespace's charter-policy ServiceAccount, whose rights
// the cleanup controller meets when it runs (docs/policy-validation.md).
func DeleteFaults(p *kyvernov2.ClusterCleanupPolicy, cluster Cluster, d *Writer) (fault.List, error) {
	ctx, cancel := context.WithTimeout(context.Background(), writerCheckTimeout)
	defer cancel()
	var faults fault.List
	m := p.Spec.MatchResources
	for _, desc := range descriptions(block{"spec.match", m.Any, m.All, nil}) {
		names := desc.names
		if len(names) == 0 {
			names = []string{""}
		}
		for k, kind := range desc.kinds {
			refusal, err := d.cannotDelete(ctx, cluster, kind, names)
			if err != nil {
				return nil, err
			}
			if refusal != "" {
				faults = append(faults, &fault.Fault{Kind: kyvernov2.ClusterCleanupPolicyKind, Name: p.GetName(),
					Field: fmt.Sprintf("%s.kinds[%d]", desc.path, k), Fault: refusal})
			}
		}
	}
	return faults, nil
}

// cannotDelete is Kyverno's message for the first of delete and list that
// d may not do on kind, for any of names ("" for every name); "" when it
// may do both.
func (d *Writer) cannotDelete(ctx context.Context, cluster Cluster, kind string, names []string) (string, error) {
	for _, name := range names {
		t, ok, err := resolveTarget(cluster, "", kind, "", name)
		if err != nil || !ok {
			return "", err
		}
		for _, verb := range []string{"delete", "list"} {
			failed, err := d.denied(ctx, t, []string{verb})
			if err != nil {
				return "", err
			}
			if len(failed) > 0 {
				return fmt.Sprintf("cleanup controller has no permission to %s kind %s", verb, kind), nil
			}
		}
	}
	return "", nil
}
