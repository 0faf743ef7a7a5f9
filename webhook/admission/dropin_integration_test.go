package admission

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/corpus"
)

// TestConformancePoliciesApply is the drop-in check of issue 28: every
// policy document of ../shared/conformance (kyverno-policies and the
// policy manifests of kyverno-chainsaw, in the versions they are written
// in) is created, as `kubectl apply` would, on a real API server with
// charter's CRDs and policy webhook, and must be admitted, or refused
// only for a reason docs/policies.md's "What charter cannot run yet" lists, or be
// a manifest Kyverno's own test expects to be refused, or name a kind this
// cluster does not serve (a CRD not installed, an API removed), which
// Kyverno's policy validation refuses too (corpus.OnlyKindsNotServed). Creates are
// server-side dry runs, so policies of the same name in different folders
// do not collide; the policies' Ready state is not waited for here
// (cmd/charter's TestDevConformancePoliciesReachReady does).
// Failures are reported as one table.
func TestConformancePoliciesApply(t *testing.T) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := corpus.PolicyDocuments(corpus.Require(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 300 {
		t.Fatalf("only %d policy documents found", len(docs))
	}
	cannot, err := corpus.ReadCannotRun(filepath.Join(root, corpus.CannotRunDoc))
	if err != nil {
		t.Fatal(err)
	}

	var namespaces []string
	for _, d := range docs {
		if ns := d.Object.GetNamespace(); ns != "" && ns != "default" && !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	f := startAdmission(t, withNamespaces(namespaces...))
	dyn, err := dynamic.NewForConfig(f.cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(f.cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))

	counts := map[string]int{}
	var failures []string
	for _, d := range docs {
		gvk := d.Object.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			failures = append(failures, fmt.Sprintf("| %s | not served: %v |", d, err))
			continue
		}
		obj := d.Object.DeepCopy()
		// As kubectl apply: a namespaced object without a namespace
		// goes to the default one, a cluster-scoped one has none.
		switch {
		case m.Scope.Name() != "namespace":
			obj.SetNamespace("")
		case obj.GetNamespace() == "":
			obj.SetNamespace("default")
		}
		var createErr error
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, createErr = dyn.Resource(m.Resource).Namespace(obj.GetNamespace()).Create(f.ctx, obj,
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
			// Right after start the webhook's certificate or the
			// CRDs may not be served yet.
			if createErr == nil || !strings.Contains(createErr.Error(), "failed calling webhook") || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		switch {
		case createErr == nil && d.KyvernoRefuses:
			counts["admitted, though Kyverno's test expects a refusal"]++
			t.Logf("%s: admitted, though Kyverno's own test expects it refused", d)
		case createErr == nil:
			counts["admitted"]++
		case d.KyvernoRefuses:
			counts["refused, as Kyverno's test expects"]++
		case cannot.Lists(createErr.Error()) != "":
			counts["refused for a reason docs/policies.md lists"]++
		case corpus.OnlyKindsNotServed(createErr.Error()):
			// Kyverno refuses it on this cluster too (its validKinds).
			counts["refused, as Kyverno refuses it here: a kind this cluster does not serve"]++
		default:
			failures = append(failures, fmt.Sprintf("| %s | %s |", d, strings.ReplaceAll(createErr.Error(), "\n", " ")))
		}
	}
	var summary []string
	for k, n := range counts {
		summary = append(summary, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(summary)
	t.Logf("%d policy documents: %s", len(docs), strings.Join(summary, ", "))
	if len(failures) > 0 {
		t.Errorf("%d of %d policy documents were refused for a reason docs/policies.md does not list:\n| document | refusal |\n|---|---|\n%s",
			len(failures), len(docs), strings.Join(failures, "\n"))
	}
}
