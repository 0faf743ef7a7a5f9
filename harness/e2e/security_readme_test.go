package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/charter-dev/charter/internal/controlplane"
)

var (
	securityDescribe = regexp.MustCompile(`Describe\(("Security: (?:[^"\\]|\\.)*")`)
	securityIt       = regexp.MustCompile(`\bIt\(("(?:[^"\\]|\\.)*")`)
	markdownCode     = regexp.MustCompile("`([^`]+)`")
)

// TestReadmeTenancyNamesSecuritySpecs: every spec that the README's
// Tenancy section names as holding a guarantee ("`Security: x` / `it`,
// `another it`") is a spec of the security suite, so that the table never
// claims a proof the suite does not run. It reads the suite's source and
// needs no cluster.
func TestReadmeTenancyNamesSecuritySpecs(t *testing.T) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	specs := securitySpecs(t, filepath.Join(root, "harness", "e2e"))
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Tenancy\n")
	if !ok {
		t.Fatal("README.md has no Tenancy section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := 0
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| ") || len(cells) != 2 || cells[0] == "| guarantee" {
			continue
		}
		named, describe := 0, ""
		for _, m := range markdownCode.FindAllStringSubmatch(cells[1], -1) {
			switch name := m[1]; {
			case strings.HasPrefix(name, "Security: "):
				describe = name
				if specs[describe] == nil {
					t.Errorf("README.md Tenancy: %q is no Describe of harness/e2e/security_*_test.go", describe)
				}
			case describe == "":
				t.Errorf("README.md Tenancy: spec %q follows no Describe (`Security: ...`)", name)
			default:
				named++
				if !specs[describe][name] {
					t.Errorf("README.md Tenancy: %q has no spec It(%q)", describe, name)
				}
			}
		}
		if named == 0 {
			t.Errorf("README.md Tenancy: the row %q names no spec", cells[0])
		}
		rows++
	}
	if rows < 10 {
		t.Errorf("README.md Tenancy: %d guarantees in its table, want the table of them", rows)
	}
}

// securitySpecs reads the Describe and It texts of the security suite's
// files in dir: the Its of each Describe.
func securitySpecs(t *testing.T, dir string) map[string]map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "security_*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]map[string]bool{}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		describes := securityDescribe.FindAllSubmatch(src, -1)
		if len(describes) != 1 {
			// The tenant helpers, and this test, hold no spec tree.
			continue
		}
		describe := unquote(t, string(describes[0][1]))
		specs[describe] = map[string]bool{}
		for _, m := range securityIt.FindAllSubmatch(src, -1) {
			specs[describe][unquote(t, string(m[1]))] = true
		}
	}
	return specs
}

func unquote(t *testing.T, s string) string {
	t.Helper()
	out, err := strconv.Unquote(s)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return out
}
