package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMakeRunBuildsThroughProgress: every Go build `make run` does (its
// prerequisites, followed through the Makefile) goes through
// hack/buildprogress, so none of them is silent for minutes on a fresh
// machine (#32 item 8). A recipe line that builds Go code another way
// (go build, go install, go run of anything else) fails the test.
func TestMakeRunBuildsThroughProgress(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	rules := makeRules(string(data))
	if _, ok := rules["run"]; !ok {
		t.Fatal("the Makefile has no run target")
	}
	goCommand := regexp.MustCompile(`\$\(GO\) (build|install|run)\b|\bgo (build|install|run)\b`)
	var progress []string
	seen := map[string]bool{}
	var visit func(target string)
	visit = func(target string) {
		if seen[target] {
			return
		}
		seen[target] = true
		r, ok := rules[target]
		if !ok {
			return // a file, not a rule
		}
		for _, p := range r.prereqs {
			visit(p)
		}
		for _, line := range r.recipe {
			if !goCommand.MatchString(line) {
				continue
			}
			if strings.Contains(line, "$(GO) run ./hack/buildprogress ") {
				progress = append(progress, target)
				continue
			}
			t.Errorf("make run builds %s without progress: %s", target, strings.TrimSpace(line))
		}
	}
	visit("run")
	// charter, etcd, kube-apiserver, kube-controller-manager.
	if len(progress) < 4 {
		t.Errorf("make run builds through hack/buildprogress only %v, want charter and the three control-plane binaries", progress)
	}
}

type makeRule struct {
	prereqs, recipe []string
}

// makeRules reads the Makefile's rules: target, prerequisites (normal and
// order-only) and recipe lines, targets as written ($(BIN)/etcd).
func makeRules(makefile string) map[string]*makeRule {
	rules := map[string]*makeRule{}
	head := regexp.MustCompile(`^([^\s:=#][^:=]*):([^=].*)?$`)
	var current *makeRule
	for _, line := range strings.Split(makefile, "\n") {
		if strings.HasPrefix(line, "\t") {
			if current != nil {
				current.recipe = append(current.recipe, line)
			}
			continue
		}
		m := head.FindStringSubmatch(line)
		if m == nil {
			if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") {
				current = nil
			}
			continue
		}
		deps, _, _ := strings.Cut(m[2], "##")
		r := &makeRule{}
		for _, d := range strings.Fields(deps) {
			if d != "|" {
				r.prereqs = append(r.prereqs, d)
			}
		}
		for _, target := range strings.Fields(m[1]) {
			if target == ".PHONY" {
				continue
			}
			rules[target] = r
		}
		current = r
	}
	return rules
}
