package promotion

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
)

// The label the reports controller puts on the reports it writes
// (reconciler/reports/report.ManagedByLabel): the gate judges charter's
// own results, never another tool's reports that happen to name a policy
// of the same name.
const (
	reportManagedByLabel = "app.kubernetes.io/managed-by"
	reportManagedBy      = "charter"
)

// defaultPageSize bounds one list call; a namespace with thousands of
// resources is read in pages.
const defaultPageSize = 500

// ReportReader lists charter's PolicyReports of a namespace through a
// controller-runtime reader. Promotions are rare and must see the latest
// results, so an uncached reader (manager.GetAPIReader) is the usual
// choice; a cache reader works too. Reports are read as unstructured
// objects, so the reader's scheme needs no report types.
type ReportReader struct {
	Reader client.Reader
	// PageSize is the list call's limit (default 500).
	PageSize int64
}

// PolicyReports returns the namespace's PolicyReports written by charter.
func (r ReportReader) PolicyReports(ctx context.Context, namespace string) ([]v1alpha2.PolicyReport, error) {
	limit := r.PageSize
	if limit <= 0 {
		limit = defaultPageSize
	}
	var out []v1alpha2.PolicyReport
	next := ""
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(v1alpha2.GroupVersion.WithKind("PolicyReportList"))
		opts := []client.ListOption{client.InNamespace(namespace),
			client.MatchingLabels{reportManagedByLabel: reportManagedBy}, client.Limit(limit)}
		if next != "" {
			opts = append(opts, client.Continue(next))
		}
		if err := r.Reader.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			var rep v1alpha2.PolicyReport
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &rep); err != nil {
				return nil, fmt.Errorf("PolicyReport %s/%s: %w", namespace, list.Items[i].GetName(), err)
			}
			out = append(out, rep)
		}
		if next = list.GetContinue(); next == "" {
			return out, nil
		}
	}
}
