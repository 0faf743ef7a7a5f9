package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestProgressCountsPackagesAndPassesErrorsThrough(t *testing.T) {
	out := "internal/abi\nruntime\nk8s.io/kubernetes/pkg/api\n# k8s.io/kubernetes/pkg/x\npkg/x/x.go:3:2: undefined: y\n"
	var errs, w bytes.Buffer
	p := &progress{name: "kube-apiserver", total: 6, start: time.Unix(0, 0), w: &w}
	p.read(strings.NewReader(out), &errs)
	if p.count() != 3 {
		t.Errorf("counted %d packages, want 3", p.count())
	}
	if errs.String() != "# k8s.io/kubernetes/pkg/x\npkg/x/x.go:3:2: undefined: y\n" {
		t.Errorf("passed through %q", errs.String())
	}
	if got, want := p.line(time.Unix(190, 0)), "  kube-apiserver: 3 of at most 6 packages compiled (50%), 3m10s"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
}

// TestRunBuildsAndPrints builds a tiny module with the real go command:
// progress lines while it builds, a final line, the binary, and go build's
// status when it fails.
func TestRunBuildsAndPrints(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/hello\n\ngo 1.22\n")
	write("main.go", "package main\n\nvar version = \"none\"\n\nfunc main() { println(version) }\n")
	var out, errs bytes.Buffer
	bin := filepath.Join(dir, "hello")
	if code := run("go", dir, bin, "example.com/hello", []string{"-ldflags", "-X main.version=v9"}, time.Millisecond, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errs.String())
	}
	// The build flags reach go build: the binary says the version the
	// -ldflags set, as make build's LDFLAGS set charter's.
	if said, err := exec.Command(bin).CombinedOutput(); err != nil || strings.TrimSpace(string(said)) != "v9" {
		t.Errorf("the binary says %q (%v), want v9 from -ldflags", said, err)
	}
	if !strings.Contains(out.String(), "  hello: built in ") {
		t.Errorf("no final line in %q", out.String())
	}

	write("main.go", "package main\n\nfunc main() { undefined() }\n")
	out.Reset()
	errs.Reset()
	if code := run("go", dir, bin, "example.com/hello", nil, time.Second, &out, &errs); code == 0 {
		t.Fatal("a build that does not compile exited 0")
	}
	if !strings.Contains(errs.String(), "undefined: undefined") || !strings.Contains(errs.String(), "hello: build failed after") {
		t.Errorf("compiler error not passed through: %q", errs.String())
	}
}
