package gitsync

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/reconciler/gitsync/apply"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

// patchCall is one server-side apply the Applier sent.
type patchCall struct {
	Object string
	DryRun bool
	Err    error
}

// recordingClient records every Patch, in the order they returned.
type recordingClient struct {
	client.Client
	mu    sync.Mutex
	calls []patchCall
}

func (c *recordingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	po := &client.PatchOptions{}
	po.ApplyOptions(opts)
	err := c.Client.Patch(ctx, obj, patch, opts...)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, patchCall{
		Object: obj.GetObjectKind().GroupVersionKind().Kind + "/" + obj.GetName(),
		DryRun: slices.Contains(po.DryRun, "All"),
		Err:    err,
	})
	return err
}

func objects(t *testing.T, docs ...string) []build.Object {
	t.Helper()
	out := make([]build.Object, len(docs))
	for i, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatal(err)
		}
		out[i] = build.Object{Unstructured: u, File: fmt.Sprintf("file-%d.yaml", i)}
	}
	return out
}

// TestApplyIsStagedAndDryRunFirst applies a revision listed in the worst
// order: the rest, then policies, exceptions, and last the Namespace and
// CRD everything else needs. Every object is dry-run before anything is
// written, except those that need the revision's Namespace or CRD, which
// are dry-run once those exist and before any later stage is written;
// stages are written in order.
func TestApplyIsStagedAndDryRunFirst(t *testing.T) {
	g := NewWithT(t)
	ns := "staged-" + newNamespace(t)
	group := ns + ".example.com"
	objs := objects(t,
		fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: %s}\ndata: {a: b}\n", ns),
		fmt.Sprintf("apiVersion: %s/v1\nkind: Gadget\nmetadata: {name: g, namespace: %s}\nspec: {size: 1}\n", group, ns),
		policy(ns+"-cluster", "team"),
		fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: local, namespace: %s}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {message: m, pattern: {metadata: {name: "?*"}}}
`, ns),
		fmt.Sprintf(`apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: legacy, namespace: %s}
spec:
  exceptions: [{policyName: %s-cluster, ruleNames: [require-team]}]
  match: {any: [{resources: {kinds: [Pod], namespaces: [%s]}}]}
`, ns, ns, ns),
		fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", ns),
		fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.%s}
spec:
  group: %s
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, group, group),
	)
	rec := &recordingClient{Client: testClient}
	applier := &apply.Applier{Client: rec, Owner: client.ObjectKey{Namespace: "test", Name: "staged"}}
	changes, err := applier.Apply(t.Context(), objs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changes.Summary()).To(Equal("7 created"))

	stage := map[string]int{
		"Namespace/" + ns: 0, "CustomResourceDefinition/gadgets." + group: 0,
		"PolicyException/legacy":           1,
		"ClusterPolicy/" + ns + "-cluster": 2, "Policy/local": 2,
		"ConfigMap/settings": 3, "Gadget/g": 3,
	}
	// Needs the revision's Namespace (or CRD): its first dry-run fails.
	deferred := map[string]bool{"PolicyException/legacy": true, "Policy/local": true, "ConfigMap/settings": true, "Gadget/g": true}

	calls := rec.calls
	// 1. A dry-run of everything, before any write.
	g.Expect(calls[:7]).To(HaveEach(HaveField("DryRun", true)))
	for _, c := range calls[:7] {
		if deferred[c.Object] {
			g.Expect(c.Err).To(HaveOccurred(), c.Object)
		} else {
			g.Expect(c.Err).NotTo(HaveOccurred(), c.Object)
		}
	}
	// 2. The Namespace and the CRD.
	g.Expect(calls[7:9]).To(ConsistOf(
		patchCall{Object: "Namespace/" + ns}, patchCall{Object: "CustomResourceDefinition/gadgets." + group}))
	// 3. The deferred objects' dry-run, now passing.
	g.Expect(calls[9:13]).To(HaveEach(And(HaveField("DryRun", true), HaveField("Err", BeNil()))))
	g.Expect(calls[9:13]).To(HaveEach(HaveField("Object", BeKeyOf(deferred))))
	// 4. The remaining stages, written in order.
	rest := calls[13:]
	g.Expect(rest).To(HaveLen(5))
	g.Expect(rest).To(HaveEach(And(HaveField("DryRun", false), HaveField("Err", BeNil()))))
	for i := 1; i < len(rest); i++ {
		g.Expect(stage[rest[i].Object]).To(BeNumerically(">=", stage[rest[i-1].Object]), "%s after %s", rest[i].Object, rest[i-1].Object)
	}

	// Applying the same revision again changes nothing.
	changes, err = applier.Apply(t.Context(), objs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changes.Summary()).To(Equal("7 unchanged"))
}

// TestApplyWritesNothingWhenTheDryRunFails: one object the API server
// refuses stops the revision before anything is written, and the error
// names its file and object.
func TestApplyWritesNothingWhenTheDryRunFails(t *testing.T) {
	g := NewWithT(t)
	name := "dryrun-" + newNamespace(t)
	objs := objects(t,
		fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", name),
		policy(name, "team"),
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad, namespace: default, labels: {team: \"not a valid label value!\"}}\n",
	)
	rec := &recordingClient{Client: testClient}
	applier := &apply.Applier{Client: rec, Owner: client.ObjectKey{Namespace: "test", Name: "dryrun"}}
	_, err := applier.Apply(t.Context(), objs)
	var aerr *apply.Error
	g.Expect(err).To(BeAssignableToTypeOf(aerr))
	aerr = err.(*apply.Error)
	g.Expect(aerr.DryRun).To(BeTrue())
	g.Expect(aerr.Invalid()).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("file-2.yaml: ConfigMap/default/bad"))
	g.Expect(rec.calls).To(HaveEach(HaveField("DryRun", true)))
	g.Expect(getPolicy(t, name)).To(BeNil())
	g.Expect(testClient.Get(t.Context(), client.ObjectKey{Name: name}, &corev1.Namespace{})).NotTo(Succeed())
}
