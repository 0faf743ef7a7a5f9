package corpus

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/api/versions"
)

// PolicyDocument is one policy document of the corpus, as written.
type PolicyDocument struct {
	// File is the document's file, relative to the corpus.
	File string
	// Index is the document's position in the file, from 0.
	Index int
	// Object is the document.
	Object *unstructured.Unstructured
	// KyvernoRefuses: Kyverno's own chainsaw test expects applying the
	// file to fail.
	KyvernoRefuses bool
}

// Where is "file#index".
func (d PolicyDocument) Where() string { return fmt.Sprintf("%s#%d", d.File, d.Index) }

func (d PolicyDocument) String() string {
	return fmt.Sprintf("%s %s %s", d.Where(), d.Object.GetAPIVersion(), d.Object.GetKind())
}

// PolicyDocuments returns every document of a kind and version charter
// serves (but UpdateRequest, charter's own work item) in the policy files
// of the corpus at dir: all of kyverno-policies but its test suites' own
// files, and the kyverno-chainsaw files that are applied (not the
// assertions a test compares the cluster with).
func PolicyDocuments(dir string) ([]PolicyDocument, error) {
	var docs []PolicyDocument
	for _, sub := range []string{"kyverno-policies", "kyverno-chainsaw"} {
		refused, asserted, err := chainsawFiles(filepath.Join(dir, sub))
		if err != nil {
			return nil, err
		}
		err = filepath.WalkDir(filepath.Join(dir, sub), func(path string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := e.Name()
			// The library's .kyverno-test and .chainsaw-test folders hold
			// test inputs and assertions; its policies live beside them.
			if e.IsDir() && sub == "kyverno-policies" && strings.HasPrefix(name, ".") {
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
			rel, _ := filepath.Rel(dir, path)
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
				docs = append(docs, PolicyDocument{File: rel, Index: i, Object: obj, KyvernoRefuses: refused[path]})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return docs, nil
}

var (
	// errorExpected matches a chainsaw check that the operation failed.
	errorExpected = regexp.MustCompile(`\(\$error\s*!=\s*null\)\s*:\s*true`)
	// scriptApply matches a script's kubectl apply or create of a file.
	scriptApply = regexp.MustCompile(`kubectl (?:apply|create) -f (\S+)`)
)

// chainsawFiles reads the chainsaw tests under dir and returns the files
// a test applies or creates expecting an error (apply/create with file: F
// and an expect check ($error != null): true, or a script `kubectl apply
// -f F` with that check), and the files it compares the cluster with
// (assert, error): those are expectations, not manifests to apply.
func chainsawFiles(dir string) (refused, asserted map[string]bool, err error) {
	refused, asserted = map[string]bool{}, map[string]bool{}
	var tests []string
	err = filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err == nil && e.Name() == "chainsaw-test.yaml" {
			tests = append(tests, path)
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	for _, file := range tests {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, nil, err
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
						refused[filepath.Join(filepath.Dir(file), f)] = true
					}
					if c, ok := body["content"].(string); ok {
						for _, m := range scriptApply.FindAllStringSubmatch(c, -1) {
							refused[filepath.Join(filepath.Dir(file), m[1])] = true
						}
					}
				}
			}
		}
	}
	return refused, asserted, nil
}

// CannotRunDoc is the page, relative to the module root, whose "What
// charter cannot run yet" section ReadCannotRun reads.
const CannotRunDoc = "docs/policies.md"

// CannotRun is what docs/policies.md's "What charter cannot run yet" section lists:
// the features of its table (the code spans of the first column), and the
// refusals of its list of what charter refuses today (the first code span
// of each line: a text charter's refusal contains).
type CannotRun struct {
	Features []string
	Refusals []string
}

// readmeSection is the section of CannotRunDoc CannotRun reads; readmeRefusals
// starts its list of refusals.
const (
	readmeSection  = "\n## What charter cannot run yet\n"
	readmeRefusals = "Refused today, one reason a line"
)

// ReadCannotRun reads the page at path (CannotRunDoc under the module root).
func ReadCannotRun(path string) (CannotRun, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return CannotRun{}, err
	}
	_, section, ok := strings.Cut(string(data), readmeSection)
	if !ok {
		return CannotRun{}, fmt.Errorf("%s has no %q section", path, strings.TrimSpace(readmeSection))
	}
	section, _, _ = strings.Cut(section, "\n## ")
	codeSpan := regexp.MustCompile("`([^`]+)`")
	var out CannotRun
	// The list follows the paragraph holding readmeRefusals and ends at
	// the first line after its items that is neither an item nor its
	// continuation.
	inList, started := false, false
	for _, line := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| feature"):
			first := strings.Split(line, "|")[1]
			for _, m := range codeSpan.FindAllStringSubmatch(first, -1) {
				out.Features = append(out.Features, m[1])
			}
		case strings.Contains(line, readmeRefusals):
			inList = true
		case inList && strings.HasPrefix(line, "- "):
			m := codeSpan.FindStringSubmatch(line)
			if m == nil {
				return CannotRun{}, fmt.Errorf("%s: %q: a refusal line starts with the refusal's text in a code span", path, line)
			}
			out.Refusals = append(out.Refusals, m[1])
			started = true
		case started && line != "" && !strings.HasPrefix(line, "  "):
			inList, started = false, false
		}
	}
	if len(out.Features) == 0 {
		return CannotRun{}, fmt.Errorf(`%s: the "What charter cannot run yet" table lists no feature`, path)
	}
	return out, nil
}

// Lists returns the entry of the page a refusal is for: a feature of the
// table, when charter refused it as not supported, or a line of the
// list; "" when it lists none.
func (c CannotRun) Lists(refusal string) string {
	if strings.Contains(refusal, "not supported by charter") || strings.Contains(refusal, "charter does not support") {
		for _, f := range c.Features {
			if strings.Contains(refusal, f) {
				return f
			}
		}
	}
	for _, r := range c.Refusals {
		if strings.Contains(refusal, r) {
			return r
		}
	}
	return ""
}

// kindNotServed ends clusterstate/policycheck's fault for a kind the
// cluster does not serve (policycheck.KindNotServed; this package may not
// import it, as engine's tests import this one: policycheck's test holds
// the two equal).
const kindNotServed = "the cluster serves no such kind"

// OnlyKindsNotServed reports whether an admission refusal is only
// Kyverno's check that the kinds a rule names are served
// (policycheck.KindFaults): every fault names a kind this cluster does
// not serve (a CRD not installed, an API removed), which Kyverno 1.19
// refuses on the same cluster too.
func OnlyKindsNotServed(refusal string) bool {
	if _, after, ok := strings.Cut(refusal, "denied the request: "); ok {
		refusal = after
	}
	found := false
	for _, line := range strings.Split(refusal, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if !strings.Contains(line, kindNotServed) {
			return false
		}
		found = true
	}
	return found
}
