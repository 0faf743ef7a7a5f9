package cleanup

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/charter-dev/charter/engine/ttl"
)

func labelled(ns, name, uid, value string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid),
		Labels: map[string]string{ttl.Label: value, "other": "dropped"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
}

// TestTTLStore: the store tells of new and changed objects only, forgets
// deleted ones (and their reported invalid values), and a relist
// (Replace) tells of what changed while the watch was down.
func TestTTLStore(t *testing.T) {
	var changed []string
	var removed []types.UID
	tracked := prometheus.NewGauge(prometheus.GaugeOpts{Name: "tracked"})
	s := &ttlStore{items: map[string]ttlEntry{}, tracked: tracked,
		changed: func(key string) { changed = append(changed, key) },
		removed: func(uid types.UID) { removed = append(removed, uid) }}
	step := func(name string, do func(), wantChanged []string, wantRemoved []types.UID, wantTracked float64) {
		t.Helper()
		changed, removed = nil, nil
		do()
		slices.Sort(changed)
		if !slices.Equal(changed, wantChanged) || !slices.Equal(removed, wantRemoved) || testutil.ToFloat64(tracked) != wantTracked {
			t.Errorf("%s: changed %v removed %v tracked %v; want %v %v %v", name, changed, removed, testutil.ToFloat64(tracked), wantChanged, wantRemoved, wantTracked)
		}
	}
	step("add", func() { _ = s.Add(labelled("a", "x", "1", "1h")) }, []string{"a/x"}, nil, 1)
	step("same again", func() { _ = s.Update(labelled("a", "x", "1", "1h")) }, nil, nil, 1)
	step("label changed", func() { _ = s.Update(labelled("a", "x", "1", "2h")) }, []string{"a/x"}, nil, 1)
	step("recreated", func() { _ = s.Update(labelled("a", "x", "2", "2h")) }, []string{"a/x"}, nil, 1)
	step("cluster-scoped", func() { _ = s.Add(labelled("", "n", "3", "1d")) }, []string{"n"}, nil, 2)
	step("deleted", func() { _ = s.Delete(labelled("a", "x", "2", "2h")) }, nil, []types.UID{"2"}, 1)
	// A relist: n unchanged, b/y new, nothing gone but what is missing.
	step("relist", func() {
		s.listed = map[string]ttlEntry{}
		for _, m := range []*metav1.PartialObjectMetadata{labelled("", "n", "3", "1d"), labelled("b", "y", "4", "5m")} {
			k, e := entryOf(m)
			s.listed[k] = e
		}
		_ = s.Replace(nil, "10")
	}, []string{"b/y"}, nil, 2)
	step("relist without n", func() {
		k, e := entryOf(labelled("b", "y", "4", "5m"))
		s.listed = map[string]ttlEntry{k: e}
		_ = s.Replace(nil, "11")
	}, nil, []types.UID{"3"}, 1)
	if e, ok := s.get("b/y"); !ok || e.value != "5m" || e.uid != "4" {
		t.Errorf("b/y = %+v, %v", e, ok)
	}
	if ns, name := splitKey("b/y"); ns != "b" || name != "y" {
		t.Errorf("splitKey = %q %q", ns, name)
	}
	step("forget", s.forget, nil, nil, 0)
}
