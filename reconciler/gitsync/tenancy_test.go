package gitsync

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

func TestWriterOf(t *testing.T) {
	repo := func(ns, sa string) *gitopsv1alpha1.PolicyRepository {
		return &gitopsv1alpha1.PolicyRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"},
			Spec:       gitopsv1alpha1.PolicyRepositorySpec{ServiceAccountName: sa},
		}
	}
	tests := []struct {
		name        string
		tenancy     Tenancy
		repo        *gitopsv1alpha1.PolicyRepository
		wantSA      string
		wantConfine bool
	}{
		{"platform repository writes as charter", Tenancy{Namespace: "charter"}, repo("charter", ""), "", false},
		{"platform repository ignores the default", Tenancy{Namespace: "charter", DefaultServiceAccount: "d"}, repo("charter", ""), "", false},
		{"platform repository with a ServiceAccount", Tenancy{Namespace: "charter"}, repo("charter", "ops"), "ops", false},
		{"platform repository is not confined by --no-cross-namespace-refs", Tenancy{Namespace: "charter", NoCrossNamespaceRefs: true}, repo("charter", ""), "", false},
		{"tenant without ServiceAccount is confined", Tenancy{Namespace: "charter"}, repo("team-a", ""), "", true},
		{"tenant takes the default ServiceAccount", Tenancy{Namespace: "charter", DefaultServiceAccount: "d"}, repo("team-a", ""), "d", false},
		{"tenant's own ServiceAccount beats the default", Tenancy{Namespace: "charter", DefaultServiceAccount: "d"}, repo("team-a", "mine"), "mine", false},
		{"--no-cross-namespace-refs confines a tenant with a ServiceAccount", Tenancy{Namespace: "charter", NoCrossNamespaceRefs: true}, repo("team-a", "mine"), "mine", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.tenancy.writerOf(tt.repo)
			if w.serviceAccount != tt.wantSA || w.ownNamespaceOnly != tt.wantConfine {
				t.Errorf("writerOf = %+v, want serviceAccount %q, ownNamespaceOnly %v", w, tt.wantSA, tt.wantConfine)
			}
			if w.ownNamespaceOnly && w.why == "" {
				t.Error("a confined writer must say why")
			}
		})
	}
}

func TestCheckOwnNamespace(t *testing.T) {
	policyGVK := schema.GroupVersionKind{Group: "kyverno.io", Version: "v1", Kind: "Policy"}
	clusterPolicyGVK := schema.GroupVersionKind{Group: "kyverno.io", Version: "v1", Kind: "ClusterPolicy"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(policyGVK, meta.RESTScopeNamespace)
	mapper.Add(clusterPolicyGVK, meta.RESTScopeRoot)
	obj := func(gvk schema.GroupVersionKind, ns, name string) build.Object {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(ns)
		u.SetName(name)
		return build.Object{Unstructured: u, File: name + ".yaml"}
	}
	tests := []struct {
		name    string
		objs    []build.Object
		stale   []gitopsv1alpha1.ResourceRef
		refused []string
	}{
		{name: "own namespace", objs: []build.Object{obj(policyGVK, "team-a", "p")}},
		{name: "no namespace is the repository's", objs: []build.Object{obj(policyGVK, "", "p")}},
		{
			name:    "cluster-scoped",
			objs:    []build.Object{obj(clusterPolicyGVK, "", "cp")},
			refused: []string{"cp.yaml: ClusterPolicy/cp: cluster-scoped"},
		},
		{
			name:    "another namespace",
			objs:    []build.Object{obj(policyGVK, "team-a", "ok"), obj(policyGVK, "team-b", "p")},
			refused: []string{"p.yaml: Policy/team-b/p is in namespace team-b"},
		},
		{
			name:    "a kind not served",
			objs:    []build.Object{obj(schema.GroupVersionKind{Group: "x.io", Version: "v1", Kind: "Gadget"}, "team-a", "g")},
			refused: []string{"g.yaml: Gadget/g: kind Gadget.x.io is not served"},
		},
		{
			name: "pruning outside",
			stale: []gitopsv1alpha1.ResourceRef{
				{ID: gitopsv1alpha1.ObjectID("team-a", "mine", "kyverno.io", "Policy"), Version: "v1"},
				{ID: gitopsv1alpha1.ObjectID("", "cp", "kyverno.io", "ClusterPolicy"), Version: "v1"},
				{ID: gitopsv1alpha1.ObjectID("team-b", "p", "kyverno.io", "Policy"), Version: "v1"},
			},
			refused: []string{"prune of ClusterPolicy/cp: cluster-scoped", "prune of Policy/team-b/p: in namespace team-b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := checkOwnNamespace(mapper, "team-a", "because", tt.objs, tt.stale)
			if len(tt.refused) == 0 {
				g.Expect(err).NotTo(HaveOccurred())
				for _, o := range tt.objs {
					g.Expect(o.GetNamespace()).To(Equal("team-a"))
				}
				return
			}
			var perr *NotPermittedError
			g.Expect(errors.As(err, &perr)).To(BeTrue(), "%v", err)
			g.Expect(perr.Why).To(Equal("because"))
			g.Expect(perr.Objects).To(HaveLen(len(tt.refused)))
			for i, want := range tt.refused {
				g.Expect(perr.Objects[i]).To(HavePrefix(want))
			}
		})
	}
}

func TestFileURLsOnlyInCharterNamespace(t *testing.T) {
	repo := func(ns, url string) *gitopsv1alpha1.PolicyRepository {
		return &gitopsv1alpha1.PolicyRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"},
			Spec:       gitopsv1alpha1.PolicyRepositorySpec{URL: url},
		}
	}
	tests := []struct {
		name    string
		tenancy Tenancy
		repo    *gitopsv1alpha1.PolicyRepository
		refused bool
	}{
		{"platform repository reads file://", Tenancy{Namespace: "charter"}, repo("charter", "file:///srv/policies"), false},
		{"tenant repository may not", Tenancy{Namespace: "charter"}, repo("team-a", "file:///var/cache/charter/other"), true},
		{"nor in capitals", Tenancy{Namespace: "charter"}, repo("team-a", "FILE:///srv/policies"), true},
		{"tenant over https", Tenancy{Namespace: "charter"}, repo("team-a", "https://git.example.com/team-a.git"), false},
		{"charter dev allows every namespace", Tenancy{Namespace: "charter", AllowFileURLs: true}, repo("team-a", "file:///srv/policies"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.tenancy.checkURL(tt.repo)
			if !tt.refused {
				NewWithT(t).Expect(err).NotTo(HaveOccurred())
				return
			}
			NewWithT(t).Expect(err).To(MatchError(And(ContainSubstring("spec.url"), ContainSubstring("charter's namespace charter"), ContainSubstring("not one in team-a"))))
		})
	}
}

func TestIntervalsAreRaisedToTheMinimum(t *testing.T) {
	g := NewWithT(t)
	r := &PolicyRepositoryReconciler{MinInterval: 10 * time.Second}
	obj := &gitopsv1alpha1.PolicyRepository{Spec: gitopsv1alpha1.PolicyRepositorySpec{
		Interval: &metav1.Duration{Duration: time.Millisecond}, RetryInterval: &metav1.Duration{Duration: time.Millisecond},
	}}
	every, note := r.intervals(obj)
	g.Expect(every).To(Equal(syncIntervals{interval: 10 * time.Second, retry: 10 * time.Second}))
	g.Expect(note).To(ContainSubstring("spec.interval 1ms and spec.retryInterval 1ms is below charter's minimum interval 10s"))

	obj.Spec.Interval, obj.Spec.RetryInterval = &metav1.Duration{Duration: time.Minute}, nil
	every, note = r.intervals(obj)
	g.Expect(every).To(Equal(syncIntervals{interval: time.Minute, retry: time.Minute}))
	g.Expect(note).To(BeEmpty())
}
