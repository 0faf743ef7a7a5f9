// Package policyreport names the report APIs charter writes its results
// to and converts between them: wgpolicyk8s.io/v1alpha2 (PolicyReport,
// ClusterPolicyReport; v1alpha2 below) and OpenReports,
// openreports.io/v1alpha1 (Report, ClusterReport; the OpenReports
// project's own Go types). The two share one layout (scope, summary,
// results with the same fields under the same JSON names), so charter
// builds every result once, in the v1alpha2 types, and only the object
// written differs: its apiVersion, kind and the Go type it is encoded
// from (ToOpenReports). Both decode into the v1alpha2 types (Decode).
package policyreport

import (
	"fmt"
	"strings"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
)

// API is a report API: the value of --reports-api, or one of the two
// APIs "both" selects.
type API string

// The report APIs.
const (
	// WGPolicyK8s is wgpolicyk8s.io/v1alpha2 PolicyReport and
	// ClusterPolicyReport, the default.
	WGPolicyK8s API = "wgpolicyk8s"
	// OpenReports is openreports.io/v1alpha1 Report and ClusterReport.
	OpenReports API = "openreports"
	// Both selects both APIs (ParseAPIs).
	Both = "both"
)

// OpenReportsGroupVersion is openreports.io/v1alpha1.
var OpenReportsGroupVersion = schema.GroupVersion(openreportsv1alpha1.GroupVersion)

// ParseAPIs parses a --reports-api value: "wgpolicyk8s", "openreports"
// or "both". The first API returned is the primary one: the one charter
// reads back (merging, sweeping, the promotion gate); with both, it is
// wgpolicyk8s, which charter wrote before OpenReports, and OpenReports
// follows it.
func ParseAPIs(s string) ([]API, error) {
	switch API(strings.TrimSpace(s)) {
	case WGPolicyK8s:
		return []API{WGPolicyK8s}, nil
	case OpenReports:
		return []API{OpenReports}, nil
	case Both:
		return []API{WGPolicyK8s, OpenReports}, nil
	}
	return nil, fmt.Errorf("reports API %q: want %s, %s or %s", s, WGPolicyK8s, OpenReports, Both)
}

// FormatAPIs is the --reports-api value that ParseAPIs reads as apis.
func FormatAPIs(apis []API) string {
	switch {
	case len(apis) == 0:
		return string(WGPolicyK8s)
	case len(apis) == 1:
		return string(apis[0])
	}
	return Both
}

// APIsFlag is the value of a --reports-api flag (a pflag.Value) that
// sets *APIs.
type APIsFlag struct{ APIs *[]API }

func (f APIsFlag) String() string {
	if f.APIs == nil {
		return ""
	}
	return FormatAPIs(*f.APIs)
}

// Set parses the flag's value (ParseAPIs).
func (f APIsFlag) Set(s string) error {
	apis, err := ParseAPIs(s)
	if err != nil {
		return fmt.Errorf("--reports-api: %w", err)
	}
	*f.APIs = apis
	return nil
}

// Type names the flag's values in help texts.
func (f APIsFlag) Type() string { return "api" }

// GroupVersion is the API's group and version.
func (a API) GroupVersion() schema.GroupVersion {
	if a == OpenReports {
		return OpenReportsGroupVersion
	}
	return v1alpha2.GroupVersion
}

// Kind is the kind of the report about a namespaced resource, or, with
// clusterScoped, about a cluster-scoped one.
func (a API) Kind(clusterScoped bool) string {
	switch {
	case a == OpenReports && clusterScoped:
		return "ClusterReport"
	case a == OpenReports:
		return "Report"
	case clusterScoped:
		return "ClusterPolicyReport"
	}
	return "PolicyReport"
}

// Resource is the API resource of Kind(clusterScoped).
func (a API) Resource(clusterScoped bool) schema.GroupVersionResource {
	return a.GroupVersion().WithResource(strings.ToLower(a.Kind(clusterScoped)) + "s")
}

// ListKind is the kind of a list of Kind(clusterScoped).
func (a API) ListKind(clusterScoped bool) schema.GroupVersionKind {
	return a.GroupVersion().WithKind(a.Kind(clusterScoped) + "List")
}

// APIOf is the API of a report's apiVersion, false for any other.
func APIOf(apiVersion string) (API, bool) {
	switch apiVersion {
	case v1alpha2.GroupVersion.String():
		return WGPolicyK8s, true
	case OpenReportsGroupVersion.String():
		return OpenReports, true
	}
	return "", false
}

// Decode reads a stored report of either API, of either scope, into the
// v1alpha2 PolicyReport that charter's code works with. OpenReports'
// Report keeps the results under the same JSON names (its Go fields
// Description and Subjects are "message" and "resources"), so one decode
// serves both; fields of a Report that v1alpha2 lacks (source,
// configuration) are not read.
func Decode(u *unstructured.Unstructured) (*v1alpha2.PolicyReport, error) {
	if _, ok := APIOf(u.GetAPIVersion()); !ok {
		return nil, fmt.Errorf("%s %s/%s: not a report of %s or %s", u.GetKind(), u.GetNamespace(), u.GetName(),
			v1alpha2.GroupVersion, OpenReportsGroupVersion)
	}
	var rep v1alpha2.PolicyReport
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rep); err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return &rep, nil
}

// ToOpenReports is results as OpenReports results.
func ToOpenReports(results []v1alpha2.PolicyReportResult) []openreportsv1alpha1.ReportResult {
	if results == nil {
		return nil
	}
	out := make([]openreportsv1alpha1.ReportResult, len(results))
	for i := range results {
		r := &results[i]
		out[i] = openreportsv1alpha1.ReportResult{
			Source:           r.Source,
			Policy:           r.Policy,
			Rule:             r.Rule,
			Category:         r.Category,
			Severity:         openreportsv1alpha1.ResultSeverity(r.Severity),
			Timestamp:        r.Timestamp,
			Result:           openreportsv1alpha1.Result(r.Result),
			Scored:           r.Scored,
			Subjects:         r.Resources,
			ResourceSelector: r.ResourceSelector,
			Description:      r.Message,
			Properties:       r.Properties,
		}
	}
	return out
}

// ToOpenReportsSummary is a summary as an OpenReports summary.
func ToOpenReportsSummary(s v1alpha2.PolicyReportSummary) openreportsv1alpha1.ReportSummary {
	return openreportsv1alpha1.ReportSummary(s)
}
