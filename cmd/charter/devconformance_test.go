package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/clusterstate/impersonate"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/corpus"
)

// conformanceNamespace holds the corpus's namespaced policies.
const conformanceNamespace = "conformance"

// conformancePolicy is one distinct policy document of the corpus as the
// test creates it.
type conformancePolicy struct {
	doc corpus.PolicyDocument
	// also are the other documents identical to this one.
	also []string
	obj  *unstructured.Unstructured
	gvr  schema.GroupVersionResource
	// refusal is the API server's answer to the create, "" when admitted.
	refusal string
}

func (p *conformancePolicy) String() string {
	s := p.doc.String()
	if p.obj.GetName() != p.doc.Object.GetName() {
		s += " (created as " + p.obj.GetName() + ")"
	}
	if len(p.also) > 0 {
		s += " (also " + strings.Join(p.also, ", ") + ")"
	}
	return s
}

// TestDevConformancePoliciesReachReady is the done-when of issue 28: on
// `charter dev` (what `make run` runs), every distinct policy document of
// ../shared/conformance, in the versions it is written in, is created as
// `kubectl apply` would, and either reaches Ready (status.conditionStatus
// .ready for the policies.kyverno.io kinds, the Ready condition for the
// kyverno.io ones; PolicyExceptions have no status: admitted is all) or is
// refused for a reason docs/policies.md's "What charter cannot run yet" lists, or
// is a manifest Kyverno's own chainsaw test expects to be refused, or names a
// kind this cluster does not serve, which Kyverno refuses too
// (corpus.OnlyKindsNotServed). A
// policy admitted that never reports Ready fails, with its status.
// Documents that are identical are created once; namespaced ones go to
// one namespace; a name taken by a different document gets a suffix.
func TestDevConformancePoliciesReachReady(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and charter dev")
	}
	dir := corpus.Require(t)
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cannot, err := corpus.ReadCannotRun(filepath.Join(root, corpus.CannotRunDoc))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := corpus.PolicyDocuments(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 300 {
		t.Fatalf("only %d policy documents found under %s", len(docs), dir)
	}

	out, _ := startDev(t, "dev", "--crds", crdDir(t))
	cfg := devRESTConfig(t, out)
	cfg.QPS, cfg.Burst = -1, 0
	ctx := t.Context()
	cl := devTestClient(t, cfg)
	if err := waitForWebhook(ctx, cl); err != nil {
		t.Fatal(err)
	}
	// The namespace of a tenant as docs/tenancy.md sets one up:
	// its namespaced cleanup policies act as its ServiceAccount
	// charter-policy, which holds the namespace's admin rights.
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: conformanceNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: conformanceNamespace, Name: impersonate.DefaultServiceAccount}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: conformanceNamespace, Name: "charter-policy-admin"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: conformanceNamespace, Name: impersonate.DefaultServiceAccount}},
		},
	} {
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}

	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	policies, failures := distinctPolicies(t, docs, mapper)

	// Created in parallel, as a GitOps tool applies a folder.
	var wg sync.WaitGroup
	work := make(chan *conformancePolicy)
	for range 8 {
		wg.Go(func() {
			for p := range work {
				p.refusal = createPolicy(ctx, dyn, p)
			}
		})
	}
	for _, p := range policies {
		work <- p
	}
	close(work)
	wg.Wait()

	counts := map[string]int{}
	pending := map[*conformancePolicy]string{}
	seen := map[string]bool{}
	for _, p := range policies {
		switch {
		case p.refusal == "" && p.doc.KyvernoRefuses:
			t.Logf("%s: admitted, though Kyverno's own test expects it refused", p)
			pending[p] = "no status yet"
		case p.refusal == "":
			pending[p] = "no status yet"
		case p.doc.KyvernoRefuses:
			counts["refused, as Kyverno's test expects"]++
		default:
			if r := cannot.Lists(p.refusal); r != "" {
				counts["refused for a reason docs/policies.md lists"]++
				seen[r] = true
				continue
			}
			if corpus.OnlyKindsNotServed(p.refusal) {
				// Kyverno refuses it on this cluster too (its validKinds).
				counts["refused, as Kyverno refuses it here: a kind this cluster does not serve"]++
				continue
			}
			failures = append(failures, fmt.Sprintf("| %s | refused: %s |", p, oneLine(p.refusal)))
		}
	}
	for _, r := range cannot.Refusals {
		if !seen[r] {
			failures = append(failures, fmt.Sprintf("| docs/policies.md | %q refuses no document of the corpus now: remove its line from \"What charter cannot run yet\" |", r))
		}
	}

	// One wait for all: each pass lists every kind once. The wait ends
	// when no policy became Ready for three minutes: on a loaded machine
	// the statuses of 700 policies take longer than on a quiet one, and a
	// policy that never gets there still fails.
	lastProgress := time.Now()
	for len(pending) > 0 && time.Since(lastProgress) < 3*time.Minute {
		byGVR := map[schema.GroupVersionResource][]*conformancePolicy{}
		for p := range pending {
			byGVR[p.gvr] = append(byGVR[p.gvr], p)
		}
		for gvr, ps := range byGVR {
			list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("listing %s: %v", gvr, err)
			}
			found := map[string]*unstructured.Unstructured{}
			for i := range list.Items {
				found[list.Items[i].GetNamespace()+"/"+list.Items[i].GetName()] = &list.Items[i]
			}
			for _, p := range ps {
				obj, ok := found[p.obj.GetNamespace()+"/"+p.obj.GetName()]
				if !ok {
					pending[p] = "gone from the cluster"
					continue
				}
				if ready, why := policyReady(obj); ready {
					delete(pending, p)
					counts["admitted and Ready"]++
					lastProgress = time.Now()
				} else {
					pending[p] = why
				}
			}
		}
		if len(pending) > 0 {
			time.Sleep(2 * time.Second)
		}
	}
	for p, why := range pending {
		failures = append(failures, fmt.Sprintf("| %s | admitted, not Ready: %s |", p, oneLine(why)))
	}

	var summary []string
	for k, n := range counts {
		summary = append(summary, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(summary)
	t.Logf("%d policy documents, %d distinct: %s", len(docs), len(policies), strings.Join(summary, ", "))
	if len(failures) > 0 {
		sort.Strings(failures)
		t.Errorf("%d of %d distinct policies neither reached Ready nor were refused for a reason docs/policies.md lists:\n| document | outcome |\n|---|---|\n%s",
			len(failures), len(policies), strings.Join(failures, "\n"))
	}
}

// distinctPolicies maps the documents to the objects to create: one per
// distinct document, namespaced ones in conformanceNamespace, a name
// already taken by a different document of the same kind suffixed with
// the document's hash. A document of a kind the API server does not serve
// is a failure.
func distinctPolicies(t *testing.T, docs []corpus.PolicyDocument, mapper *restmapper.DeferredDiscoveryRESTMapper) ([]*conformancePolicy, []string) {
	t.Helper()
	var out []*conformancePolicy
	var failures []string
	byContent := map[string]*conformancePolicy{}
	taken := map[string]bool{}
	for _, d := range docs {
		gvk := d.Object.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			failures = append(failures, fmt.Sprintf("| %s | not served: %v |", d, err))
			continue
		}
		obj := d.Object.DeepCopy()
		if m.Scope.Name() == "namespace" {
			obj.SetNamespace(conformanceNamespace)
		} else {
			obj.SetNamespace("")
		}
		data, err := json.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		sum := fmt.Sprintf("%x", sha256.Sum256(data))
		if p, ok := byContent[sum]; ok {
			p.also = append(p.also, d.Where())
			continue
		}
		// Kinds share a name space across their versions.
		key := func(name string) string { return gvk.Group + "/" + gvk.Kind + "/" + name }
		if taken[key(obj.GetName())] {
			name := obj.GetName()
			if len(name) > 50 {
				name = name[:50]
			}
			obj.SetName(strings.TrimSuffix(name, "-") + "-" + sum[:8])
		}
		taken[key(obj.GetName())] = true
		p := &conformancePolicy{doc: d, obj: obj, gvr: m.Resource}
		byContent[sum] = p
		out = append(out, p)
	}
	return out, failures
}

// createPolicy creates p as `kubectl apply` would (strict field
// validation) and returns the refusal, "" when admitted.
func createPolicy(ctx context.Context, dyn dynamic.Interface, p *conformancePolicy) string {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := dyn.Resource(p.gvr).Namespace(p.obj.GetNamespace()).Create(ctx, p.obj, metav1.CreateOptions{FieldValidation: "Strict"})
		if err == nil {
			return ""
		}
		// The name is taken by a policy of the dev environment (gitsync
		// applied environments/dev): another name, as for duplicates.
		if apierrors.IsAlreadyExists(err) && p.obj.GetName() == p.doc.Object.GetName() {
			p.obj.SetName(p.obj.GetName() + "-conformance")
			continue
		}
		// A webhook call can time out under load: kubectl apply would
		// be run again.
		if !strings.Contains(err.Error(), "failed calling webhook") || time.Now().After(deadline) {
			return err.Error()
		}
		time.Sleep(time.Second)
	}
}

// policyReady reads obj's status as its kind has it: status.conditionStatus
// .ready for the policies.kyverno.io policy kinds, the Ready condition for
// the kyverno.io kinds; PolicyExceptions have no status. It returns why
// not when it is not ready.
func policyReady(obj *unstructured.Unstructured) (bool, string) {
	gvk := obj.GroupVersionKind()
	if strings.HasSuffix(gvk.Kind, "PolicyException") {
		return true, ""
	}
	if gvk.Group == "policies.kyverno.io" {
		cs, _, _ := unstructured.NestedMap(obj.Object, "status", "conditionStatus")
		if ready, _ := cs["ready"].(bool); ready {
			return true, ""
		}
		data, _ := json.Marshal(cs)
		return false, "conditionStatus " + string(data)
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		c, _ := c.(map[string]any)
		if c["type"] == "Ready" {
			if c["status"] == "True" {
				return true, ""
			}
			return false, fmt.Sprintf("Ready %v, %v: %v", c["status"], c["reason"], c["message"])
		}
	}
	return false, "no Ready condition"
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	return s
}
