package promotion

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pagedReports is a client.Reader holding n PolicyReports of one
// namespace, serving them page by page as the API server does.
type pagedReports struct {
	client.Reader
	namespace string
	n         int
	calls     []client.ListOptions
}

func (p *pagedReports) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	var o client.ListOptions
	o.ApplyOptions(opts)
	p.calls = append(p.calls, o)
	u, ok := list.(*unstructured.UnstructuredList)
	if !ok {
		return fmt.Errorf("list into %T, want unstructured", list)
	}
	if gvk := u.GroupVersionKind(); gvk.String() != "wgpolicyk8s.io/v1alpha2, Kind=PolicyReportList" {
		return fmt.Errorf("list of %s", gvk)
	}
	start := 0
	if o.Continue != "" {
		start, _ = strconv.Atoi(o.Continue)
	}
	end := min(start+int(o.Limit), p.n)
	for i := start; i < end; i++ {
		u.Items = append(u.Items, unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
			"metadata": map[string]any{"name": fmt.Sprintf("uid-%d", i), "namespace": p.namespace},
			"scope":    map[string]any{"kind": "Pod", "name": fmt.Sprintf("pod-%d", i)},
			"results":  []any{map[string]any{"policy": "p", "rule": "r", "result": "fail"}},
		}})
	}
	if end < p.n {
		u.SetContinue(strconv.Itoa(end))
	}
	return nil
}

func TestReportReaderPagesThroughCharterReports(t *testing.T) {
	r := &pagedReports{namespace: "shop", n: 5}
	got, err := ReportReader{Reader: r, PageSize: 2}.PolicyReports(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[4].Scope.Name != "pod-4" || got[4].Results[0].Result != "fail" {
		t.Fatalf("got %d reports (%+v), want the 5 served", len(got), got)
	}
	if len(r.calls) != 3 {
		t.Errorf("%d list calls, want 3 pages of 2", len(r.calls))
	}
	want := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": "charter"}).String()
	for i, c := range r.calls {
		if c.Namespace != "shop" || c.Limit != 2 || c.LabelSelector == nil || c.LabelSelector.String() != want {
			t.Errorf("call %d: namespace %q limit %d selector %v; want shop, 2, %s", i, c.Namespace, c.Limit, c.LabelSelector, want)
		}
	}
}
