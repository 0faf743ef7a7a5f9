// Package inventory records which objects a PolicyRepository applied, so
// the objects that leave the repository can be pruned.
package inventory

import (
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// Ref returns the inventory entry of an object.
func Ref(u *unstructured.Unstructured) gitopsv1alpha1.ResourceRef {
	gvk := u.GroupVersionKind()
	return gitopsv1alpha1.ResourceRef{
		ID:      gitopsv1alpha1.ObjectID(u.GetNamespace(), u.GetName(), gvk.Group, gvk.Kind),
		Version: gvk.Version,
	}
}

// New returns the inventory of objs, sorted by ID.
func New(objs []*unstructured.Unstructured) *gitopsv1alpha1.ResourceInventory {
	inv := &gitopsv1alpha1.ResourceInventory{Entries: make([]gitopsv1alpha1.ResourceRef, 0, len(objs))}
	seen := map[string]bool{}
	for _, u := range objs {
		ref := Ref(u)
		if seen[ref.ID] {
			continue
		}
		seen[ref.ID] = true
		inv.Entries = append(inv.Entries, ref)
	}
	sort.Slice(inv.Entries, func(i, j int) bool { return inv.Entries[i].ID < inv.Entries[j].ID })
	return inv
}

// Len is the number of entries of a possibly nil inventory.
func Len(inv *gitopsv1alpha1.ResourceInventory) int {
	if inv == nil {
		return 0
	}
	return len(inv.Entries)
}

// Stale returns the entries of old that are not in current: the objects
// that left the repository. The version does not matter, only the identity.
func Stale(old, current *gitopsv1alpha1.ResourceInventory) []gitopsv1alpha1.ResourceRef {
	if old == nil {
		return nil
	}
	keep := map[string]bool{}
	if current != nil {
		for _, e := range current.Entries {
			keep[e.ID] = true
		}
	}
	var stale []gitopsv1alpha1.ResourceRef
	for _, e := range old.Entries {
		if !keep[e.ID] {
			stale = append(stale, e)
		}
	}
	return stale
}

// Object returns an object holding only the identity an entry records,
// enough to get or delete it.
func Object(ref gitopsv1alpha1.ResourceRef) (*unstructured.Unstructured, error) {
	ns, name, group, kind, err := gitopsv1alpha1.ParseObjectID(ref.ID)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: ref.Version, Kind: kind})
	u.SetNamespace(ns)
	u.SetName(name)
	return u, nil
}

// Dedup sorts inv and drops repeated IDs, keeping the first version seen.
func Dedup(inv *gitopsv1alpha1.ResourceInventory) *gitopsv1alpha1.ResourceInventory {
	out := &gitopsv1alpha1.ResourceInventory{}
	seen := map[string]bool{}
	for _, e := range inv.Entries {
		if !seen[e.ID] {
			seen[e.ID] = true
			out.Entries = append(out.Entries, e)
		}
	}
	sort.Slice(out.Entries, func(i, j int) bool { return out.Entries[i].ID < out.Entries[j].ID })
	return out
}
