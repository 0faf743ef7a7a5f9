package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/charter-dev/charter/internal/controlplane"
)

// TestDevTryLinesNameFilesThatExist: the banner charter dev prints once
// its repository is Ready names example files that exist, whichever
// repository --repo syncs and wherever charter dev runs: this checkout's
// examples, charter's checkout's when --repo names a repository without
// them, and none at all (only commands that need no file) when neither
// folder has them.
func TestDevTryLinesNameFilesThatExist(t *testing.T) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ownRepo := t.TempDir() // a policy repository of one's own: no examples/
	elsewhere := t.TempDir()
	applyLine := regexp.MustCompile(`kubectl apply -f (\S+)`)
	for _, c := range []struct {
		name, repo, workDir string
		wantApplies         int
	}{
		{"this checkout, from it", root, root, 3},
		{"this checkout, from elsewhere", root, elsewhere, 3},
		{"--repo of one's own, from charter's checkout", ownRepo, root, 3},
		{"--repo of one's own, from elsewhere", ownRepo, elsewhere, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Chdir(c.workDir)
			var out bytes.Buffer
			e := &devEnvironment{out: &out, kubeconfigPath: filepath.Join(t.TempDir(), "kubeconfig")}
			e.ready(devSource{dir: c.repo}, nil)
			banner := out.String()
			if !strings.Contains(banner, "kubectl get cpol") || !strings.Contains(banner, "kubectl get polr -A") {
				t.Errorf("banner lacks the commands that need no file:\n%s", banner)
			}
			applies := applyLine.FindAllStringSubmatch(banner, -1)
			if len(applies) != c.wantApplies {
				t.Errorf("%d kubectl apply lines, want %d:\n%s", len(applies), c.wantApplies, banner)
			}
			for _, m := range applies {
				path := m[1]
				if !filepath.IsAbs(path) {
					path = filepath.Join(c.workDir, path)
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("the banner names %s, which does not exist (run from %s): %v", m[1], c.workDir, err)
				}
			}
			if c.wantApplies == 0 && !strings.Contains(banner, "holds no examples/ folder") {
				t.Errorf("the banner does not say why it names no example:\n%s", banner)
			}
		})
	}
}
