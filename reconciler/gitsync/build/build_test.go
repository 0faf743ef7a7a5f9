package build

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
)

func TestBuild(t *testing.T) {
	tests := []struct {
		name string
		dir  string
		// want maps "Kind/name" to the file it must come from.
		want map[string]string
	}{
		{
			name: "overlay lists files of sibling folders",
			dir:  "env/dev",
			want: map[string]string{
				"ClusterPolicy/require-labels": "policies/require-labels/require-labels.yaml",
				"Namespace/team-a":             "env/dev/namespace.yaml",
			},
		},
		{
			name: "plain folder skips test suites, fixtures and hidden files, includes kustomized sub-folders",
			dir:  "plain",
			want: map[string]string{
				"ClusterPolicy/require-labels": "plain/sub/require-labels.yaml",
				"Namespace/team-a":             "plain/ns.yaml",
				"ConfigMap/kust-settings":      "plain/kust/cm.yaml",
			},
		},
		{
			name: "leading ./ and trailing slash",
			dir:  "./env/dev/",
			want: map[string]string{
				"ClusterPolicy/require-labels": "policies/require-labels/require-labels.yaml",
				"Namespace/team-a":             "env/dev/namespace.yaml",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			objs, err := Build(context.Background(), "testdata/repo", tt.dir)
			g.Expect(err).NotTo(HaveOccurred())
			got := map[string]string{}
			for _, o := range objs {
				got[o.GetKind()+"/"+o.GetName()] = o.File
				g.Expect(o.GetAnnotations()).NotTo(HaveKey(originAnnotation))
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestBuildErrorsNameTheFolder(t *testing.T) {
	g := NewWithT(t)
	_, err := Build(context.Background(), "testdata/repo", "env/missing")
	var be *Error
	g.Expect(errors.As(err, &be)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("env/missing: no such folder"))
}

func TestBuildCannotReadOutsideTheRepository(t *testing.T) {
	g := NewWithT(t)
	_, err := Build(context.Background(), "testdata/repo/env", "dev")
	// ../../policies is outside the copied repository root.
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("policies/require-labels/require-labels.yaml"))
}

// Built objects go to the API server through clients that deep-copy them:
// every number must be a JSON number type (int64 or float64), never a Go
// int, or DeepCopy panics.
func TestBuiltObjectsDeepCopy(t *testing.T) {
	g := NewWithT(t)
	objs, err := Build(context.Background(), "../../..", "environments/dev")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).NotTo(BeEmpty())
	for _, o := range objs {
		g.Expect(func() { o.DeepCopy() }).NotTo(Panic(), "DeepCopy of %s/%s", o.GetKind(), o.GetName())
	}
}

// TestPlainFolderIsDecodedAsKustomizeWould: a folder without any
// kustomization is decoded file by file; what comes out is what kustomize
// renders from a kustomization that lists the same files.
func TestPlainFolderIsDecodedAsKustomizeWould(t *testing.T) {
	tests := []struct {
		name, root, dir string
		want            map[string]string
	}{
		{
			name: "documents, lists and JSON", root: "testdata/repo", dir: "/documents",
			want: map[string]string{
				"Namespace/team-b":   "documents/multi.yaml",
				"ConfigMap/flags":    "documents/multi.yaml",
				"ConfigMap/listed-a": "documents/list.yaml",
				"ConfigMap/listed-b": "documents/list.yaml",
				"ResourceQuota/pods": "documents/quota.json",
			},
		},
		{name: "test suites and their fixtures skipped", root: "testdata/repo", dir: "/policies",
			want: map[string]string{"ClusterPolicy/require-labels": "policies/require-labels/require-labels.yaml"}},
		// charter's own library: every policy, its tests and fixtures.
		{name: "the policy library", root: "../../..", dir: "/policies"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			plain, ok, err := buildPlain(tt.root, tt.dir)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeTrue())
			kustomized, err := buildKustomize(tt.root, tt.dir)
			g.Expect(err).NotTo(HaveOccurred())

			byID := func(objs []Object) map[string]Object {
				m := map[string]Object{}
				for _, o := range objs {
					m[identity(o.Unstructured)] = o
				}
				return m
			}
			want := byID(kustomized)
			g.Expect(plain).To(HaveLen(len(kustomized)))
			for id, o := range byID(plain) {
				g.Expect(want).To(HaveKey(id))
				g.Expect(o.File).To(Equal(want[id].File), id)
				g.Expect(o.Object).To(Equal(want[id].Object), id)
			}
			if tt.want != nil {
				got := map[string]string{}
				for _, o := range plain {
					got[o.GetKind()+"/"+o.GetName()] = o.File
				}
				g.Expect(got).To(Equal(tt.want))
			}
		})
	}
}

func TestPlainFolderFaultsNameTheFile(t *testing.T) {
	tests := []struct{ dir, err string }{
		{dir: "duplicate", err: "duplicate/ns.yaml: Namespace. twice is declared twice (first in duplicate/a/ns.yaml)"},
		{dir: "notobject", err: "notobject/list.yaml: document 1 is not an object"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			_, err := Build(context.Background(), "testdata/repo", tt.dir)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.err)))
		})
	}
}

// TestEnvironmentsStageTheRestrictedSet: dev, staging and prod stage the
// same six Pod Security restricted policies (components/staged-restricted),
// so promoting a namespace works in each, `make run`'s dev included.
func TestEnvironmentsStageTheRestrictedSet(t *testing.T) {
	want := []string{"disallow-privilege-escalation", "require-run-as-non-root-user", "require-run-as-nonroot",
		"restrict-capabilities-strict", "restrict-seccomp-strict", "restrict-volume-types"}
	for _, env := range []string{"dev", "staging", "prod"} {
		t.Run(env, func(t *testing.T) {
			g := NewWithT(t)
			objs, err := Build(context.Background(), "../../..", "environments/"+env)
			g.Expect(err).NotTo(HaveOccurred())
			var staged []string
			for _, o := range objs {
				g.Expect(o.GetLabels()).To(HaveKeyWithValue("charter.dev/environment", env), "%s/%s", o.GetKind(), o.GetName())
				if o.GetLabels()["charter.dev/staged"] == "true" {
					staged = append(staged, o.GetName())
				}
			}
			g.Expect(staged).To(ConsistOf(want))
		})
	}
}
