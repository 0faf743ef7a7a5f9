package admission

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/api/versions"
	"github.com/charter-dev/charter/internal/controlplane"
)

// policyDoc is one policy document of the conformance corpus.
type policyDoc struct {
	file  string // relative to the corpus
	index int
	obj   *unstructured.Unstructured
	// kyvernoRefuses: Kyverno's own chainsaw test expects applying the
	// file to fail.
	kyvernoRefuses bool
}

func (d policyDoc) String() string {
	return fmt.Sprintf("%s#%d %s %s", d.file, d.index, d.obj.GetAPIVersion(), d.obj.GetKind())
}

// TestConformancePoliciesApply is the drop-in check of issue 28: every
// policy document of ../shared/conformance (kyverno-policies and the
// policy manifests of kyverno-chainsaw, in the versions they are written
// in) is created, as `kubectl apply` would, on a real API server with
// charter's CRDs and policy webhook, and must be admitted, or refused
// only for a feature README's "What charter cannot run yet" lists, or be
// a manifest Kyverno's own test expects to be refused, or be one of the
// known gaps of testdata/dropin-known-refusals.txt. Creates are
// server-side dry runs, so policies of the same name in different folders
// do not collide; the policies' Ready state is not waited for here.
// Failures are reported as one table.
func TestConformancePoliciesApply(t *testing.T) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	corpus := filepath.Join(filepath.Dir(root), "shared", "conformance")
	docs := conformancePolicies(t, corpus)
	if len(docs) < 300 {
		t.Fatalf("only %d policy documents found under %s", len(docs), corpus)
	}
	unsupported := readmeUnsupported(t, filepath.Join(root, "README.md"))
	known := knownRefusals(t, filepath.Join("testdata", "dropin-known-refusals.txt"))

	var namespaces []string
	for _, d := range docs {
		if ns := d.obj.GetNamespace(); ns != "" && ns != "default" && !slices.Contains(namespaces, ns) {
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
		gvk := d.obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			failures = append(failures, fmt.Sprintf("| %s | not served: %v |", d, err))
			continue
		}
		obj := d.obj.DeepCopy()
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
		where := fmt.Sprintf("%s#%d", d.file, d.index)
		if _, listed := known[where]; listed {
			if createErr == nil {
				failures = append(failures, fmt.Sprintf("| %s | admitted now: remove it from testdata/dropin-known-refusals.txt |", d))
			} else {
				counts["refused, a known gap (testdata/dropin-known-refusals.txt)"]++
			}
			continue
		}
		switch {
		case createErr == nil && d.kyvernoRefuses:
			counts["admitted, though Kyverno's test expects a refusal"]++
			t.Logf("%s: admitted, though Kyverno's own test expects it refused", d)
		case createErr == nil:
			counts["admitted"]++
		case d.kyvernoRefuses:
			counts["refused, as Kyverno's test expects"]++
		case listedReason(createErr.Error(), unsupported):
			counts["refused for a feature README lists"]++
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
		t.Errorf("%d of %d policy documents were refused for a reason neither README nor testdata/dropin-known-refusals.txt lists:\n| document | refusal |\n|---|---|\n%s",
			len(failures), len(docs), strings.Join(failures, "\n"))
	}
}

// conformancePolicies returns every document of a kind and version
// charter serves (but UpdateRequest, charter's own work item) in the
// policy files of the corpus: all of kyverno-policies but the test
// suites' own files, and the kyverno-chainsaw files that are applied
// (not the assertions a test compares the cluster with).
func conformancePolicies(t *testing.T, corpus string) []policyDoc {
	t.Helper()
	var docs []policyDoc
	for _, dir := range []string{"kyverno-policies", "kyverno-chainsaw"} {
		refused, asserted := chainsawFiles(t, filepath.Join(corpus, dir))
		err := filepath.WalkDir(filepath.Join(corpus, dir), func(path string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := e.Name()
			// The library's .kyverno-test and .chainsaw-test folders hold
			// test inputs and assertions; its policies live beside them.
			if e.IsDir() && dir == "kyverno-policies" && strings.HasPrefix(name, ".") {
				return filepath.SkipDir
			}
			if e.IsDir() || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) || asserted[path] ||
				strings.HasSuffix(strings.TrimSuffix(name, filepath.Ext(name)), "-assert") {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(corpus, path)
			reader := yamlutil.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
			for i := 0; ; i++ {
				raw, err := reader.Read()
				if err == io.EOF {
					break
				}
				if err != nil {
					return fmt.Errorf("%s: %w", rel, err)
				}
				var m map[string]any
				if yaml.Unmarshal(raw, &m) != nil || m == nil {
					continue
				}
				obj := &unstructured.Unstructured{Object: m}
				gvk := obj.GroupVersionKind()
				if !versions.Served(gvk) || gvk.Kind == "UpdateRequest" {
					continue
				}
				docs = append(docs, policyDoc{file: rel, index: i, obj: obj, kyvernoRefuses: refused[path]})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return docs
}

// errorExpected matches a chainsaw check that the operation failed.
var errorExpected = regexp.MustCompile(`\(\$error\s*!=\s*null\)\s*:\s*true`)

// chainsawFiles reads the chainsaw tests under dir and returns the files
// a test applies or creates expecting an error (apply/create with file: F
// and an expect check ($error != null): true, or a script `kubectl apply
// -f F` with that check), and the files it compares the cluster with
// (assert, error): those are expectations, not manifests to apply.
func chainsawFiles(t *testing.T, dir string) (refused, asserted map[string]bool) {
	t.Helper()
	refused, asserted = map[string]bool{}, map[string]bool{}
	var tests []string
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err == nil && e.Name() == "chainsaw-test.yaml" {
			tests = append(tests, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	out := refused
	for _, file := range tests {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var test struct {
			Spec struct {
				Steps []struct {
					Try []map[string]any `json:"try"`
				} `json:"steps"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(data, &test); err != nil {
			continue
		}
		for _, step := range test.Spec.Steps {
			for _, op := range step.Try {
				for _, verb := range []string{"assert", "error"} {
					if body, ok := op[verb].(map[string]any); ok {
						if f, ok := body["file"].(string); ok {
							asserted[filepath.Join(filepath.Dir(file), f)] = true
						}
					}
				}
				for _, verb := range []string{"apply", "create", "script"} {
					body, ok := op[verb].(map[string]any)
					if !ok {
						continue
					}
					text, _ := yaml.Marshal(body)
					if !errorExpected.Match(text) {
						continue
					}
					if f, ok := body["file"].(string); ok {
						out[filepath.Join(filepath.Dir(file), f)] = true
					}
					if c, ok := body["content"].(string); ok {
						for _, m := range regexp.MustCompile(`kubectl (?:apply|create) -f (\S+)`).FindAllStringSubmatch(c, -1) {
							out[filepath.Join(filepath.Dir(file), m[1])] = true
						}
					}
				}
			}
		}
	}
	return refused, asserted
}

// knownRefusals reads the documents charter refuses today for a reason
// README does not list yet: "file#index -- why" a line.
func knownRefusals(t *testing.T, file string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		doc, why, ok := strings.Cut(line, " -- ")
		if !ok || why == "" {
			t.Fatalf("%s: %q: want \"file#index -- why\"", file, line)
		}
		out[doc] = why
	}
	return out
}

// readmeUnsupported returns the features README's "What charter cannot
// run yet" table lists: the code spans of its first column.
func readmeUnsupported(t *testing.T, readme string) []string {
	t.Helper()
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## What charter cannot run yet\n")
	if !ok {
		t.Fatal(`README has no "What charter cannot run yet" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var features []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| feature") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(first, -1) {
			features = append(features, m[1])
		}
	}
	if len(features) == 0 {
		t.Fatal(`README's "What charter cannot run yet" table lists no feature`)
	}
	return features
}

// listedReason reports whether a refusal is charter's for a feature
// README lists.
func listedReason(msg string, features []string) bool {
	if !strings.Contains(msg, "not supported by charter") && !strings.Contains(msg, "charter does not support") {
		return false
	}
	for _, f := range features {
		if strings.Contains(msg, f) {
			return true
		}
	}
	return false
}
