package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/api/strict"
	"github.com/charter-dev/charter/api/versions"
	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/docexamples"
)

// TestDocsExamples holds every example of README.md and docs/*.md against
// the repository, so that no page tells a reader to do what cannot work:
//
//   - a relative link names a file that exists, and a heading of it that
//     exists;
//   - a path a shell command names (a file of this repository: its first
//     folder exists here, or it ends in .yaml) exists;
//   - a charter command names a subcommand and flags the CLI has, and
//     `charter test` and `charter apply` commands that need no cluster
//     and hold no placeholder (<...>) are run and must succeed;
//   - a make command names targets of the Makefile;
//   - kubectl apply/create/delete -f names a file that exists (-k a
//     folder), and the here-document of `kubectl apply -f -` is a manifest;
//   - every YAML block, and every such manifest, parses; an object of a
//     kind charter serves decodes strictly (unknown fields fail) and, a
//     policy, exception or GlobalContextEntry, passes the check policy
//     admission runs (policycheck.Object); a PolicyRepository decodes
//     strictly into its type.
//
// What needs a cluster (kubectl get, charter dev, the tour's promotion)
// is run by the dev tests (TestDevReportsAPIOpenReports and the banner's
// Try lines in TestDevTryLinesNameFilesThatExist).
func TestDocsExamples(t *testing.T) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	if len(pages) < 10 {
		t.Fatalf("only %d pages under %s", len(pages), root)
	}
	targets := makeTargets(t, filepath.Join(root, "Makefile"))
	// charter test and apply read paths relative to the checkout, as a
	// reader runs them.
	t.Chdir(root)
	for _, page := range pages {
		rel, _ := filepath.Rel(root, page)
		t.Run(rel, func(t *testing.T) {
			data, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range docexamples.Links(rel, data) {
				checkLink(t, root, l)
			}
			blocks, err := docexamples.Blocks(rel, data)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range blocks {
				switch {
				case b.IsShell():
					cmds, err := docexamples.Commands(b)
					if err != nil {
						t.Error(err)
						continue
					}
					for _, c := range cmds {
						checkCommand(t, root, targets, rel, c)
					}
				case b.Lang == "yaml":
					checkManifest(t, b.Where(), b.Text)
				}
			}
		})
	}
}

// checkLink: a relative link's file exists, and so does its anchor when
// it names a Markdown page.
func checkLink(t *testing.T, root string, l docexamples.Link) {
	t.Helper()
	if strings.Contains(l.Target, "://") || strings.HasPrefix(l.Target, "mailto:") {
		return
	}
	file, anchor, _ := strings.Cut(l.Target, "#")
	path := filepath.Join(root, filepath.Dir(l.Page), file)
	if file == "" {
		path = filepath.Join(root, l.Page)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("%s: link %q: %v", l.Where(), l.Target, err)
		return
	}
	if anchor == "" || !strings.HasSuffix(path, ".md") {
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !docexamples.Anchors(data)[anchor] {
		t.Errorf("%s: link %q: %s has no heading #%s", l.Where(), l.Target, file, anchor)
	}
}

// placeholder marks what the reader fills in or what differs per run.
var placeholder = regexp.MustCompile("[<>…*$`{}]")

// repoPath reports whether a command's word names a file of this
// repository: no URL, no absolute path, no placeholder, and its first
// folder exists in the checkout or it is a manifest.
func repoPath(root, word string) bool {
	if word == "" || word == "-" || strings.Contains(word, "://") || filepath.IsAbs(word) ||
		strings.HasPrefix(word, "..") || placeholder.MatchString(word) {
		return false
	}
	first, _, nested := strings.Cut(word, "/")
	if nested && first != "." {
		if _, err := os.Stat(filepath.Join(root, first)); err == nil {
			return true
		}
	}
	return strings.HasSuffix(word, ".yaml") || strings.HasSuffix(word, ".yml")
}

func checkCommand(t *testing.T, root string, targets map[string]bool, page string, c docexamples.Command) {
	t.Helper()
	where := fmt.Sprintf("%s:%d", page, c.Line)
	for _, a := range c.Args[1:] {
		if _, value, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			a = value
		}
		if repoPath(root, a) {
			if _, err := os.Stat(filepath.Join(root, a)); err != nil {
				t.Errorf("%s: %s names %s, which does not exist", where, strings.Join(c.Args, " "), a)
			}
		}
	}
	switch filepath.Base(c.Args[0]) {
	case "charter":
		checkCharterCommand(t, where, c.Args[1:])
	case "make":
		for _, a := range c.Args[1:] {
			if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && !targets[a] {
				t.Errorf("%s: make %s: the Makefile has no such target", where, a)
			}
		}
	case "kubectl":
		if len(c.Args) < 2 || (c.Args[1] != "apply" && c.Args[1] != "create" && c.Args[1] != "delete") {
			return
		}
		for i, a := range c.Args {
			if (a == "-f" || a == "-k") && i+1 < len(c.Args) && c.Args[i+1] == "-" {
				if c.Stdin == "" {
					t.Errorf("%s: kubectl %s -f - reads nothing", where, c.Args[1])
				}
				checkManifest(t, where, c.Stdin)
			}
		}
	}
}

// checkCharterCommand: the subcommand and flags exist; a test or apply
// that needs no cluster and holds no placeholder runs and succeeds.
func checkCharterCommand(t *testing.T, where string, args []string) {
	t.Helper()
	cmd, rest, err := newRootCommand().Find(args)
	if err != nil || cmd.Parent() == nil {
		t.Errorf("%s: charter %s: no such command (%v)", where, strings.Join(args, " "), err)
		return
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("%s: charter %s: %v", where, strings.Join(args, " "), err)
		return
	}
	name := cmd.Name()
	if name != "test" && name != "apply" && name != "convert" {
		return
	}
	if name == "convert" {
		args = convertOutputToTemp(t, args)
	}
	for _, a := range args {
		if placeholder.MatchString(a) || strings.Contains(a, "://") || a == "--cluster" {
			return
		}
	}
	run := newRootCommand()
	run.SetArgs(args)
	var out bytes.Buffer
	run.SetOut(&out)
	run.SetErr(&out)
	if err := run.Execute(); err != nil {
		t.Errorf("%s: charter %s failed: %v\n%s", where, strings.Join(args, " "), err, lastLines(out.String(), 40))
	}
}

// checkManifest: every document parses; a kind charter serves decodes
// strictly and passes policy admission's check; a PolicyRepository
// decodes strictly.
func checkManifest(t *testing.T, where, text string) {
	t.Helper()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	for n := 1; ; n++ {
		doc, err := reader.Read()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Errorf("%s: document %d: %v", where, n, err)
			return
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		data, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Errorf("%s: document %d does not parse: %v", where, n, err)
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(data, &tm); err != nil || tm.Kind == "" || tm.APIVersion == "" {
			continue // a fragment: parsing is all it can show
		}
		gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
		switch {
		case versions.Served(gvk):
			obj, err := versions.Decode(gvk, data)
			if err != nil {
				t.Errorf("%s: %s: %v", where, tm.Kind, err)
				continue
			}
			if _, err := policycheck.Object(obj); err != nil {
				t.Errorf("%s: %s is refused: %v", where, tm.Kind, err)
			}
		case gvk.GroupKind() == (schema.GroupKind{Group: gitopsv1alpha1.GroupVersion.Group, Kind: "PolicyRepository"}):
			if err := strict.Unmarshal(data, &gitopsv1alpha1.PolicyRepository{}); err != nil {
				t.Errorf("%s: PolicyRepository: %v", where, err)
			}
		}
	}
}

// makeTargets reads the Makefile's target names.
func makeTargets(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9][A-Za-z0-9_.-]*):`).FindAllStringSubmatch(string(data), -1) {
		out[m[1]] = true
	}
	return out
}

// lastLines is the end of a command's output, for a failure message.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// convertOutputToTemp points a charter convert -o DIR example at a
// temporary folder, so that running the docs writes nothing into the
// checkout.
func convertOutputToTemp(t *testing.T, args []string) []string {
	out := append([]string(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		if (out[i] == "-o" || out[i] == "--output") && out[i+1] != "json" && out[i+1] != "yaml" {
			out[i+1] = t.TempDir()
		}
	}
	return out
}
