package report

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"

	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
)

// Labels charter puts on its reports. Kyverno labels its reports
// app.kubernetes.io/managed-by: kyverno; charter names itself by default
// (ManagedBy), so that neither tool takes the other's reports for its
// own while both run. A cluster that replaced Kyverno with charter may
// have charter write Kyverno's value instead (KyvernoManagedBy,
// --reports-managed-by=kyverno), so that what selects Kyverno's reports
// by the label (dashboards, scripts, Kyverno's own e2e tests) reads
// charter's, and charter adopts the reports Kyverno left.
const (
	ManagedByLabel   = "app.kubernetes.io/managed-by"
	ManagedBy        = "charter"
	KyvernoManagedBy = "kyverno"
)

// ParseManagedBy checks a value for the managed-by label of charter's
// reports: "" (ManagedBy), ManagedBy or KyvernoManagedBy.
func ParseManagedBy(s string) (string, error) {
	switch s {
	case "", ManagedBy:
		return ManagedBy, nil
	case KyvernoManagedBy:
		return KyvernoManagedBy, nil
	}
	return "", fmt.Errorf("%q: the managed-by label of charter's reports is %s or %s", s, ManagedBy, KyvernoManagedBy)
}

// Scope is the resource a report is about.
type Scope struct {
	APIVersion string
	Kind       string
	Namespace  string // empty for a cluster-scoped resource
	Name       string
	UID        types.UID
}

// ReportName is the report's name: the resource's UID, as Kyverno names
// it, so one resource never has two reports and a recreated resource of
// the same name starts afresh.
func (s Scope) ReportName() string { return string(s.UID) }

// ReportKind is the kind of the resource's report in api: PolicyReport
// or Report for a namespaced resource, ClusterPolicyReport or
// ClusterReport for a cluster-scoped one.
func (s Scope) ReportKind(api policyreport.API) string { return api.Kind(s.Namespace == "") }

// ReportResource is the API resource of ReportKind(api).
func (s Scope) ReportResource(api policyreport.API) schema.GroupVersionResource {
	return api.Resource(s.Namespace == "")
}

// String names the resource for logs and errors.
func (s Scope) String() string {
	if s.Namespace == "" {
		return fmt.Sprintf("%s %s (%s)", s.Kind, s.Name, s.UID)
	}
	return fmt.Sprintf("%s %s/%s (%s)", s.Kind, s.Namespace, s.Name, s.UID)
}

// wireReport is a report as charter sends it: the typed report minus
// the zero creationTimestamp that metav1.ObjectMeta always encodes (server-
// side apply would claim it) and minus the fields charter never sets.
// Encoding this struct directly costs a fraction of building an
// unstructured map and encoding that. The summary and results are of the
// API's own types (S, R): wgpolicyk8s.io's or OpenReports'.
type wireReport[S, R any] struct {
	wireHeader
	Summary S   `json:"summary"`
	Results []R `json:"results"`
}

// wireHeader is what the reports of both APIs say alike.
type wireHeader struct {
	APIVersion string                  `json:"apiVersion"`
	Kind       string                  `json:"kind"`
	Metadata   wireMeta                `json:"metadata"`
	Scope      *corev1.ObjectReference `json:"scope"`
}

type wireMeta struct {
	Name            string                  `json:"name"`
	Namespace       string                  `json:"namespace,omitempty"`
	ResourceVersion string                  `json:"resourceVersion,omitempty"`
	Labels          map[string]string       `json:"labels"`
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
}

// JSON encodes the report of a resource holding the results, in api,
// labelled app.kubernetes.io/managed-by: managedBy (ManagedBy when ""):
// named after the resource's UID, in its namespace, owned by it (so the
// garbage collector deletes it with the resource), with the resource as
// its scope and the summary counted from the results. It is the body of a
// create, or, with the resourceVersion of the report it replaces, of an
// update. The results are built once, as v1alpha2 results; only here do
// the APIs part.
func JSON(api policyreport.API, managedBy string, scope Scope, results []v1alpha2.PolicyReportResult, resourceVersion string) []byte {
	if managedBy == "" {
		managedBy = ManagedBy
	}
	h := wireHeader{
		APIVersion: api.GroupVersion().String(),
		Kind:       scope.ReportKind(api),
		Metadata: wireMeta{
			Name:            scope.ReportName(),
			Namespace:       scope.Namespace,
			ResourceVersion: resourceVersion,
			Labels:          map[string]string{ManagedByLabel: managedBy},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: scope.APIVersion,
				Kind:       scope.Kind,
				Name:       scope.Name,
				UID:        scope.UID,
			}},
		},
		Scope: &corev1.ObjectReference{
			APIVersion: scope.APIVersion,
			Kind:       scope.Kind,
			Namespace:  scope.Namespace,
			Name:       scope.Name,
			UID:        scope.UID,
		},
	}
	summary := v1alpha2.Summarize(results)
	var w any = &wireReport[v1alpha2.PolicyReportSummary, v1alpha2.PolicyReportResult]{h, summary, results}
	if api == policyreport.OpenReports {
		w = &wireReport[openreportsv1alpha1.ReportSummary, openreportsv1alpha1.ReportResult]{h,
			policyreport.ToOpenReportsSummary(summary), policyreport.ToOpenReports(results)}
	}
	data, err := json.Marshal(w)
	if err != nil {
		// The types are plain structs of strings, numbers and maps.
		panic(fmt.Sprintf("report: encoding the report of %s: %v", scope, err))
	}
	return data
}

// Object is the report JSON builds, as an unstructured object.
func Object(api policyreport.API, managedBy string, scope Scope, results []v1alpha2.PolicyReportResult) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(JSON(api, managedBy, scope, results, "")); err != nil {
		panic(fmt.Sprintf("report: decoding the report of %s: %v", scope, err))
	}
	return u
}

// Parsed is what the controller needs from a stored report.
type Parsed struct {
	Scope   Scope
	Results []v1alpha2.PolicyReportResult
	// ManagedBy is the report's app.kubernetes.io/managed-by label: the
	// writer's own value (ManagedBy, or KyvernoManagedBy when charter
	// writes Kyverno's) or another tool's.
	ManagedBy string
}

// Parse reads a stored report of either API and either scope. The scope
// comes from the report's scope field, or from its owner when the scope is
// missing.
func Parse(u *unstructured.Unstructured) (*Parsed, error) {
	rep, err := policyreport.Decode(u)
	if err != nil {
		return nil, err
	}
	p := &Parsed{Results: rep.Results, ManagedBy: rep.Labels[ManagedByLabel]}
	switch {
	case rep.Scope != nil:
		p.Scope = Scope{APIVersion: rep.Scope.APIVersion, Kind: rep.Scope.Kind, Namespace: rep.Scope.Namespace, Name: rep.Scope.Name, UID: rep.Scope.UID}
	case len(rep.OwnerReferences) > 0:
		o := rep.OwnerReferences[0]
		p.Scope = Scope{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: rep.Namespace, Name: o.Name, UID: o.UID}
	}
	if p.Scope.UID == "" {
		p.Scope.UID = types.UID(rep.Name)
	}
	Sort(p.Results)
	return p, nil
}
