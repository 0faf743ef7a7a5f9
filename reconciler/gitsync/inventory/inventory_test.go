package inventory

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

func obj(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func TestNewSortsAndDeduplicates(t *testing.T) {
	g := NewWithT(t)
	inv := New([]*unstructured.Unstructured{
		obj("kyverno.io/v1", "ClusterPolicy", "", "b"),
		obj("v1", "Namespace", "", "team-a"),
		obj("kyverno.io/v1", "ClusterPolicy", "", "b"),
		obj("kyverno.io/v2", "PolicyException", "team-a", "allow"),
	})
	g.Expect(inv.Entries).To(Equal([]gitopsv1alpha1.ResourceRef{
		{ID: "_b_kyverno.io_ClusterPolicy", Version: "v1"},
		{ID: "_team-a__Namespace", Version: "v1"},
		{ID: "team-a_allow_kyverno.io_PolicyException", Version: "v2"},
	}))
}

func TestStale(t *testing.T) {
	tests := []struct {
		name         string
		old, current []*unstructured.Unstructured
		want         []string
	}{
		{name: "nothing before", current: []*unstructured.Unstructured{obj("v1", "Namespace", "", "a")}},
		{
			name:    "removed object is stale",
			old:     []*unstructured.Unstructured{obj("v1", "Namespace", "", "a"), obj("kyverno.io/v1", "ClusterPolicy", "", "p")},
			current: []*unstructured.Unstructured{obj("v1", "Namespace", "", "a")},
			want:    []string{"_p_kyverno.io_ClusterPolicy"},
		},
		{
			name:    "a version change is not a removal",
			old:     []*unstructured.Unstructured{obj("kyverno.io/v2beta1", "PolicyException", "ns", "e")},
			current: []*unstructured.Unstructured{obj("kyverno.io/v2", "PolicyException", "ns", "e")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var old *gitopsv1alpha1.ResourceInventory
			if tt.old != nil {
				old = New(tt.old)
			}
			var got []string
			for _, e := range Stale(old, New(tt.current)) {
				got = append(got, e.ID)
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestObjectRoundTrip(t *testing.T) {
	g := NewWithT(t)
	in := obj("kyverno.io/v2", "PolicyException", "team-a", "allow")
	out, err := Object(Ref(in))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.GroupVersionKind()).To(Equal(in.GroupVersionKind()))
	g.Expect(out.GetNamespace()).To(Equal("team-a"))
	g.Expect(out.GetName()).To(Equal("allow"))
}
