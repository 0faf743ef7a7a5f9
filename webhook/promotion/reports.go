package promotion

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
)

// The label the reports controller puts on the reports it writes
// (reconciler/reports/report.ManagedByLabel): the gate judges charter's
// own results, never another tool's reports that happen to name a policy
// of the same name. Its value is charter's (reportManagedBy) unless the
// reports controller writes Kyverno's (ReportReader.ManagedBy).
const (
	reportManagedByLabel = "app.kubernetes.io/managed-by"
	reportManagedBy      = "charter"
)

// defaultPageSize bounds one list call; a namespace with thousands of
// resources is read in pages.
const defaultPageSize = 500

// ReportReader lists charter's reports of a namespace through a
// controller-runtime reader, in the report API charter reads its reports
// back from (the first of --reports-api: PolicyReports, or OpenReports'
// Reports). Promotions are rare and must see the latest results, so an
// uncached reader (manager.GetAPIReader) is the usual choice; a cache
// reader works too. Reports are read as unstructured objects, so the
// reader's scheme needs no report types.
type ReportReader struct {
	Reader client.Reader
	// API is the report API read (default wgpolicyk8s).
	API policyreport.API
	// PageSize is the list call's limit (default 500).
	PageSize int64
	// ManagedBy is the app.kubernetes.io/managed-by label of charter's
	// reports (--reports-managed-by; default charter).
	ManagedBy string
}

// PolicyReports returns the namespace's reports written by charter, of
// either API, in the v1alpha2 shape the gate judges.
func (r ReportReader) PolicyReports(ctx context.Context, namespace string) ([]v1alpha2.PolicyReport, error) {
	limit := r.PageSize
	if limit <= 0 {
		limit = defaultPageSize
	}
	api := r.API
	if api == "" {
		api = policyreport.WGPolicyK8s
	}
	managedBy := r.ManagedBy
	if managedBy == "" {
		managedBy = reportManagedBy
	}
	var out []v1alpha2.PolicyReport
	next := ""
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(api.ListKind(false))
		opts := []client.ListOption{client.InNamespace(namespace),
			client.MatchingLabels{reportManagedByLabel: managedBy}, client.Limit(limit)}
		if next != "" {
			opts = append(opts, client.Continue(next))
		}
		if err := r.Reader.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			rep, err := policyreport.Decode(&list.Items[i])
			if err != nil {
				return nil, err
			}
			out = append(out, *rep)
		}
		if next = list.GetContinue(); next == "" {
			return out, nil
		}
	}
}
