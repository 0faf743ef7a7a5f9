package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// libraryCharterNamespace is charter's namespace in the library specs; its
// webhooks leave it alone, so a Pod created there is what the API server
// makes of it without charter.
const libraryCharterNamespace = "e2e-library-charter"

// libraryNamespaceLabels are the labels the library's suites give their
// namespaces as variables (apiCall results in the CLI): in the cluster the
// namespaces carry them for real.
var libraryNamespaceLabels = map[string]map[string]string{
	"payments": {"team": "payments", "cost-center": "cc-4711"},
}

// libraryTest is the part of a kyverno-test.yaml the specs read.
type libraryTest struct {
	Policies  []string `json:"policies"`
	Resources []string `json:"resources"`
	Results   []struct {
		Kind             string   `json:"kind"`
		Resources        []string `json:"resources"`
		PatchedResources string   `json:"patchedResources"`
	} `json:"results"`
}

// libraryCase is one resource a mutate policy of the library must change,
// and what it must look like after.
type libraryCase struct {
	policy   string
	resource *unstructured.Unstructured
	patched  *unstructured.Unstructured
}

// Every mutate policy of charter's library (policies/mutate) does in a real
// cluster what its kyverno-test.yaml says it does in the CLI: each resource
// with patchedResources, created through the API server, comes out with
// the patched fields, and those fields are charter's doing (the API server
// alone, in a namespace charter's webhooks leave alone, does not set them).
var _ = Describe("Library: mutate policies in the cluster", Label("library"), Ordered, inClusterPriority, func() {
	var (
		cases     []libraryCase
		charterNS string
	)

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl := suite.client
		dirs, err := filepath.Glob(filepath.Join(suite.root, "policies", "mutate", "*"))
		Expect(err).NotTo(HaveOccurred())
		Expect(dirs).NotTo(BeEmpty())
		var policies []*unstructured.Unstructured
		for _, dir := range dirs {
			p, c := libraryMutateCases(dir)
			policies, cases = append(policies, p...), append(cases, c...)
		}
		Expect(cases).NotTo(BeEmpty())

		namespaces := map[string]bool{libraryCharterNamespace: true}
		for _, c := range cases {
			if ns := c.resource.GetNamespace(); ns != "" {
				namespaces[ns] = true
			}
		}
		for ns := range namespaces {
			obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: libraryNamespaceLabels[ns]}}
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, obj))).To(Succeed())
		}
		// Charter's own namespace is one its webhooks never see.
		charterNS = useCharter(ctx, libraryCharterNamespace, "admission")
		for _, p := range policies {
			// The policy webhook may not answer yet: retry until it does.
			Eventually(func() error { return client.IgnoreAlreadyExists(cl.Create(ctx, p.DeepCopy())) }).
				WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "creating %s", p.GetName())
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, p))).To(Succeed()) })
		}
	})

	It("changes every resource as its test's patchedResources say, where the API server alone does not", func(ctx SpecContext) {
		cl := suite.client
		for _, c := range cases {
			By(fmt.Sprintf("%s: %s %s/%s", c.policy, c.resource.GetKind(), c.resource.GetNamespace(), c.resource.GetName()))
			// The API server alone: the same resource where charter's
			// webhooks do not reach, never stored.
			alone := c.resource.DeepCopy()
			alone.SetNamespace(charterNS)
			Expect(cl.Create(ctx, alone, client.DryRunAll)).To(Succeed())
			Expect(libraryMismatches(alone.Object, c.patched.Object, "")).NotTo(BeEmpty(),
				"%s: the API server alone already gives %s/%s its patched fields: the policy changes nothing in a cluster", c.policy, c.resource.GetKind(), c.resource.GetName())

			// Through charter: the mutating webhook is registered once
			// the policy is served, so wait for the patch to show.
			Eventually(func(g Gomega) {
				live := c.resource.DeepCopy()
				g.Expect(cl.Create(ctx, live, client.DryRunAll)).To(Succeed())
				g.Expect(libraryMismatches(live.Object, c.patched.Object, "")).To(BeEmpty())
			}).WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(),
				"%s: %s %s/%s as patched.yaml says", c.policy, c.resource.GetKind(), c.resource.GetNamespace(), c.resource.GetName())
			stored := c.resource.DeepCopy()
			Expect(cl.Create(ctx, stored)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, stored))).To(Succeed()) })
			Expect(libraryMismatches(stored.Object, c.patched.Object, "")).To(BeEmpty(), "stored %s/%s", c.resource.GetKind(), c.resource.GetName())
		}
	})
})

// libraryMutateCases reads a policy folder: its policies, and each resource
// its kyverno-test.yaml expects patched, with the patched form.
func libraryMutateCases(dir string) ([]*unstructured.Unstructured, []libraryCase) {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(dir, "kyverno-test.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var test libraryTest
	Expect(yaml.Unmarshal(data, &test)).To(Succeed())
	var policies []*unstructured.Unstructured
	for _, f := range test.Policies {
		policies = append(policies, libraryObjects(filepath.Join(dir, f))...)
	}
	Expect(policies).To(HaveLen(1), "%s: one policy per folder", dir)
	byName := func(files []string) map[string]*unstructured.Unstructured {
		out := map[string]*unstructured.Unstructured{}
		for _, f := range files {
			for _, o := range libraryObjects(filepath.Join(dir, f)) {
				out[o.GetKind()+"/"+o.GetName()] = o
			}
		}
		return out
	}
	resources := byName(test.Resources)
	var cases []libraryCase
	for _, r := range test.Results {
		if r.PatchedResources == "" {
			continue
		}
		patched := byName([]string{r.PatchedResources})
		for _, name := range r.Resources {
			key := r.Kind + "/" + name
			Expect(resources).To(HaveKey(key), "%s: resource %s", dir, key)
			Expect(patched).To(HaveKey(key), "%s: patched %s", dir, key)
			cases = append(cases, libraryCase{policy: policies[0].GetName(), resource: resources[key], patched: patched[key]})
		}
	}
	Expect(cases).NotTo(BeEmpty(), "%s: no resource its test expects patched", dir)
	return policies, cases
}

// libraryObjects decodes every document of a YAML file.
func libraryObjects(path string) []*unstructured.Unstructured {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out
		}
		Expect(err).NotTo(HaveOccurred(), path)
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

// libraryMismatches lists the paths where got lacks what want holds: every
// field of want must be in got with the same value; lists are compared
// element by element. The API server's additions are not mismatches.
func libraryMismatches(got, want any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v, want an object", path, got)}
		}
		var out []string
		for k, v := range w {
			if path == "" && k == "metadata" {
				// Name and namespace differ where the API server alone
				// is asked; labels and annotations are compared.
				m, _ := v.(map[string]any)
				gm, _ := g["metadata"].(map[string]any)
				for _, field := range []string{"labels", "annotations"} {
					if m[field] != nil {
						out = append(out, libraryMismatches(gm[field], m[field], "metadata."+field)...)
					}
				}
				continue
			}
			out = append(out, libraryMismatches(g[k], v, path+"."+k)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: %v, want %d elements", path, got, len(w))}
		}
		var out []string
		for i := range w {
			out = append(out, libraryMismatches(g[i], w[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	default:
		if !reflect.DeepEqual(got, want) && fmt.Sprint(got) != fmt.Sprint(want) {
			return []string{fmt.Sprintf("%s: %v, want %v", path, got, want)}
		}
		return nil
	}
}
