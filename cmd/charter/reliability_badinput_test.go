package main

import (
	"crypto/sha256"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/internal/reliability"
)

// pod.yaml of the runs that need a resource.
const reliabilityPod = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec: {containers: [{name: c, image: nginx:1.27}]}
`

// TestReliabilityBadCLIFiles (issue #31, bad input corpus) runs charter
// test and charter apply on bad files: each run of
// internal/reliability/testdata/badinput/cli (broken kyverno-test.yaml,
// missing or malformed policy, resource and values files), and charter
// apply of every invalid policy of the corpus. Each must fail, saying
// which file and what is wrong in it, and leave the files as they were.
func TestReliabilityBadCLIFiles(t *testing.T) {
	var tally reliability.Tally
	// run writes files to dir, runs charter, and returns its refusal (nil
	// when it succeeded); a change to the files is tallied.
	run := func(name, dir string, files map[string]string, args []string) error {
		for path, content := range files {
			p := filepath.Join(dir, filepath.FromSlash(path))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := fileSums(t, dir)
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], "{dir}", dir)
		}
		stdout, stderr, err := runCharter(t, args...)
		var refusal error
		if err != nil {
			// An exit code carries no text: the command said it all.
			refusal = errors.New(strings.Join([]string{err.Error(), stdout, stderr}, "\n"))
		}
		if after := fileSums(t, dir); !maps.Equal(before, after) {
			tally.Changed(name + ": the files changed")
		}
		return refusal
	}
	for _, r := range reliability.BadCLIRuns(t) {
		tally.Refused(r.File, run(r.File, t.TempDir(), r.Files, r.Args), r.Want...)
	}
	for _, p := range reliability.BadPolicies(t) {
		dir := t.TempDir()
		refusal := run("apply "+p.File, dir, map[string]string{p.File: string(p.YAML(t)), "pod.yaml": reliabilityPod},
			[]string{"apply", filepath.Join(dir, p.File), "--resource", filepath.Join(dir, "pod.yaml")})
		// What apply evaluates must name the field, and where: the file,
		// or the policy by kind and name. What it does not evaluate
		// (exceptions, cleanup kinds, GlobalContextEntry) must be refused
		// as no policy, naming the file.
		want := []string{p.Kind(), p.Policy["metadata"].(map[string]any)["name"].(string), p.Field}
		if refusal != nil && strings.Contains(refusal.Error(), p.File) {
			want = []string{p.File, p.Field}
		}
		group, _, _ := strings.Cut(p.Policy["apiVersion"].(string), "/")
		if k, ok := policycheck.Lookup(group, p.Kind()); !ok || k.Role != policycheck.RolePolicy {
			want = []string{p.File, "no ClusterPolicy or Policy found"}
		}
		tally.Refused("apply "+p.File, refusal, want...)
	}
	tally.Report(t, "bad input: CLI files (charter test, charter apply)")
}

// fileSums is every file under dir by its path, with its SHA-256.
func fileSums(t *testing.T, dir string) map[string][sha256.Size]byte {
	t.Helper()
	sums := map[string][sha256.Size]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sums[p] = sha256.Sum256(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}
