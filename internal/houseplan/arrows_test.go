package houseplan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/charter-dev/charter"

// mayImport is, per room (the first folder of a package's path), the
// rooms and packages its code may import: a name ending in "/" is a room,
// any other a package. A room may always import itself. It is the table
// of ../shared/DESIGN.md plus the shared leaves docs/architecture.md
// gives reasons for.
var mayImport = map[string][]string{
	"api":    {},
	"engine": {"api/"},
	// Every room below cmd that dials on a policy's behalf shares the one
	// egress guard (DESIGN.md, Tenancy); the rooms with bounded queues
	// share how their drops are logged; the controllers that run only on
	// the leader share the one Lease that pauses them (internal/leadership).
	"clusterstate": {"api/", "engine/", "internal/egress", "internal/droplog"},
	"imageverify":  {"api/", "engine/", "internal/egress", "internal/droplog"},
	"webhook":      {"api/", "engine/", "clusterstate/", "imageverify/", "internal/egress", "internal/droplog"},
	"reconciler":   {"api/", "engine/", "clusterstate/", "imageverify/", "internal/egress", "internal/droplog", "internal/leadership"},
	// The local provider is charter's embedded control plane, which
	// charter dev runs too; cmd may not import harness, so it lives in
	// internal/.
	"harness": {"api/", "internal/controlplane", "internal/workdir"},
	// The CLI's own packages (suite runner, printers, control plane,
	// the reports server), which may read the generated manifests
	// config/ embeds (config/crd).
	"internal": {"api/", "engine/", "clusterstate/", "imageverify/", "config/"},
	// The binary and the build and benchmark helpers wire every room.
	"cmd":    {"api/", "engine/", "clusterstate/", "imageverify/", "webhook/", "reconciler/", "internal/"},
	"hack":   {"api/", "engine/", "clusterstate/", "imageverify/", "webhook/", "reconciler/", "internal/"},
	"config": {"api/", "engine/", "clusterstate/", "imageverify/", "webhook/", "reconciler/", "internal/"},
}

// leaves are the internal/ packages other rooms may import: each imports
// no charter package but other leaves, so it carries no policy knowledge
// and no arrow through it points back up.
var leaves = []string{"internal/egress", "internal/droplog", "internal/controlplane", "internal/workdir", "internal/leadership"}

// open are the forbidden arrows known and not yet removed, each with what
// removes it: the test logs them instead of failing, and fails when one is
// gone, so the list only shrinks.
var open = map[string]string{}

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	Imports    []string
}

// TestArrows lists every package of the module and checks each import of
// a charter package by the package's code (its tests may use the local
// control plane and test helpers) against mayImport and leaves.
func TestArrows(t *testing.T) {
	pkgs := listPackages(t)
	if len(pkgs) < 50 {
		t.Fatalf("go list found %d packages; is the module root right?", len(pkgs))
	}
	var forbidden []string
	seen := map[string]bool{}
	for _, p := range pkgs {
		from := strings.TrimPrefix(p.ImportPath, module+"/")
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := strings.TrimPrefix(imp, module+"/")
			why := check(from, to)
			arrow := from + " → " + to
			switch {
			case why == "":
			case open[arrow] != "":
				seen[arrow] = true
				t.Logf("open: %s (%s): %s", arrow, why, open[arrow])
			default:
				forbidden = append(forbidden, arrow+": "+why)
			}
		}
	}
	for arrow := range open {
		if !seen[arrow] {
			t.Errorf("%s is gone: remove it from open", arrow)
		}
	}
	sort.Strings(forbidden)
	for _, f := range forbidden {
		t.Error(f)
	}
}

// TestCheck shows the rules refuse what the plan forbids.
func TestCheck(t *testing.T) {
	cases := []struct {
		from, to string
		allowed  bool
	}{
		{"engine/validate", "api/kyverno/v1", true},
		{"engine", "clusterstate/policycache", false},
		{"engine", "internal/egress", false},
		{"reconciler/cleanup", "reconciler/internal/runner", true},
		{"reconciler/cleanup", "clusterstate/impersonate", true},
		{"reconciler/gitsync", "internal/egress", true},
		{"reconciler/gitsync", "engine/convert", true},
		{"reconciler/gitsync", "internal/convertverify", false},
		{"reconciler/cleanup", "internal/controlplane", false},
		{"reconciler/reports", "webhook/metrics", false},
		{"harness/cluster", "internal/controlplane", true},
		{"harness/cluster", "engine", false},
		{"harness/cluster", "internal/printer", false},
		{"webhook/server", "cmd/charter", false},
		{"internal/clitest", "harness/e2e", false},
		{"internal/controlplane", "internal/workdir", true},
		{"internal/egress", "engine", false},
		{"docs/example", "api/kyverno/v1", false},
	}
	for _, tc := range cases {
		if got := check(tc.from, tc.to) == ""; got != tc.allowed {
			t.Errorf("%s → %s allowed: %v, want %v", tc.from, tc.to, got, tc.allowed)
		}
	}
}

// check returns why from may not import to ("" if it may); both are paths
// inside the module.
func check(from, to string) string {
	fromRoom, toRoom := room(from), room(to)
	allowed, known := mayImport[fromRoom]
	switch {
	case !known:
		return "folder " + fromRoom + "/ is no room of the plan (add it to docs/architecture.md and mayImport)"
	case toRoom == "cmd" || toRoom == "harness" && fromRoom != "harness":
		return "nothing imports cmd or harness"
	case isLeaf(from):
		if !isLeaf(to) {
			return "a shared internal/ leaf imports other leaves only"
		}
		return ""
	case fromRoom == toRoom:
		return ""
	}
	for _, a := range allowed {
		if strings.HasSuffix(a, "/") && toRoom+"/" == a || to == a || strings.HasPrefix(to, a+"/") {
			return ""
		}
	}
	return fromRoom + "/ may import " + strings.Join(allowed, ", ") + " only"
}

func room(path string) string {
	r, _, _ := strings.Cut(path, "/")
	return r
}

func isLeaf(path string) bool {
	for _, l := range leaves {
		if path == l || strings.HasPrefix(path, l+"/") {
			return true
		}
	}
	return false
}

// listPackages runs go list over the module (from this package's
// folder, inside it).
func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}
