package gitsync

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/internal/reliability"
)

// TestReliabilityBadRevisions (issue #31, bad input corpus) commits broken
// revisions on top of a good one: each of
// internal/reliability/testdata/badinput/revisions (YAML errors, unknown
// kinds, duplicates, broken kustomizations), every invalid policy of the
// corpus at once, and a file too large to be a manifest. Each must be
// refused whole, its status naming the file and what is wrong, with the
// cluster's state (every object of every resource) left as the good
// revision made it; then the good revision applies again.
func TestReliabilityBadRevisions(t *testing.T) {
	ns := newNamespace(t)
	src := newGitRepo(t)
	good := src.commit(map[string]string{
		"policies/good-a.yaml": policy("rel-good-a", "team"),
		"policies/good-b.yaml": policy("rel-good-b", "owner"),
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	readyAt(t, repo, good)
	before, err := reliability.Snapshot(t.Context(), testConfig)
	if err != nil {
		t.Fatal(err)
	}

	everyPolicy := reliability.BadFiles{File: "every bad policy in one revision", Files: map[string]string{}}
	for _, p := range reliability.BadPolicies(t) {
		path := "policies/bad/" + p.File
		everyPolicy.Files[path] = string(p.YAML(t))
		everyPolicy.Want = append(everyPolicy.Want, path+": "+p.Kind(), p.Field)
	}
	huge := reliability.BadFiles{
		File:  "a 5 MiB manifest",
		Files: map[string]string{"policies/huge.yaml": hugeConfigMap(5 << 20)},
		Want:  []string{"policies/huge.yaml"},
	}

	var tally reliability.Tally
	var previous map[string]string
	for _, bad := range append(reliability.BadRevisions(t), everyPolicy, huge) {
		files := map[string]string{}
		for path := range previous {
			files[path] = "" // removed
		}
		for path, content := range bad.Files {
			files[path] = content
		}
		previous = bad.Files
		rev := src.commit(files, nil)
		got := eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
			g.Expect(r.Status.LastAttemptedRevision).To(Equal(rev))
			g.Expect(r.Status.ObservedGeneration).To(Equal(r.Generation))
			ready := condition(r, gitopsv1alpha1.ConditionReady)
			g.Expect(ready.Status == metav1.ConditionFalse || r.Status.LastAppliedRevision == rev).To(BeTrue(),
				"Ready %s (%s), last applied %s", ready.Status, ready.Message, r.Status.LastAppliedRevision)
		})
		var refusal error
		if ready := condition(got, gitopsv1alpha1.ConditionReady); got.Status.LastAppliedRevision != rev {
			refusal = errors.New(ready.Reason + ": " + ready.Message)
		}
		tally.Refused(bad.File, refusal, bad.Want...)
	}
	after, err := reliability.Snapshot(t.Context(), testConfig)
	if err != nil {
		t.Fatal(err)
	}
	tally.Changed(before.Diff(after)...)

	// The fix applies at once: nothing of the broken revisions lingers.
	fixed := map[string]string{}
	for path := range previous {
		fixed[path] = ""
	}
	readyAt(t, repo, src.commit(fixed, nil))
	tally.Report(t, "bad input: Git revisions of a PolicyRepository")
}

// hugeConfigMap is a ConfigMap manifest of about size bytes, every line a
// short data entry: well-formed YAML too large to be a policy file.
func hugeConfigMap(size int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: huge, namespace: default}\ndata:\n")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "  key-%07d: %s\n", i, strings.Repeat("x", 100))
	}
	return b.String()
}
