package cliapply

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policyreportv1alpha2 "github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/internal/clitest/manifest"
	"github.com/charter-dev/charter/internal/printer"
)

// Record is a verdict as -o json|yaml prints it.
type Record struct {
	Resource Resource `json:"resource"`
	Policy   string   `json:"policy"`
	Rule     string   `json:"rule"`
	Action   string   `json:"action,omitempty"`
	Result   string   `json:"result"`
	Message  string   `json:"message,omitempty"`
}

// Resource names a resource in a Record.
type Resource struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// Records converts verdicts for machine output.
func Records(o *Outcome, failOnly bool) []Record {
	out := make([]Record, 0, len(o.Verdicts))
	for _, v := range o.Verdicts {
		if failOnly && !isProblem(v.Result) {
			continue
		}
		r := v.Resource
		out = append(out, Record{
			Resource: Resource{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name},
			Policy:   v.Policy, Rule: v.Rule, Action: string(v.Action), Result: v.Result, Message: v.Message,
		})
	}
	return out
}

func isProblem(result string) bool { return result == "fail" || result == "warn" || result == "error" }

// WriteTable prints one row per verdict (only fail, warn and error with
// failOnly) and the summary line.
func WriteTable(w io.Writer, o *Outcome, color, failOnly bool) error {
	tbl := printer.NewTable("RESOURCE", "POLICY", "RULE", "ACTION", "RESULT", "MESSAGE")
	for _, v := range o.Verdicts {
		if failOnly && !isProblem(v.Result) {
			continue
		}
		tbl.AddCells(
			printer.Cell{Text: resourceName(v.Resource)}, printer.Cell{Text: v.Policy}, printer.Cell{Text: v.Rule},
			printer.Cell{Text: string(v.Action)}, resultCell(v.Result), printer.Cell{Text: v.Message},
		)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Applied %d policies (%d rules) to %d resources.\n\n", o.Policies, o.Rules, o.Resources)
	if tbl.Len() > 0 {
		if err := tbl.Write(&b, color); err != nil {
			return err
		}
		b.WriteByte('\n')
	}
	b.WriteString(o.SummaryLine())
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// resourceName is Kind/namespace/name, Kyverno's form in messages.
func resourceName(r engine.ResourceRef) string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

func resultCell(result string) printer.Cell {
	switch result {
	case "pass":
		return printer.Cell{Text: result, Style: printer.Green}
	case "fail", "error":
		return printer.Cell{Text: result, Style: printer.Red}
	case "warn":
		return printer.Cell{Text: result, Style: printer.Yellow}
	}
	return printer.Cell{Text: result}
}

// Annotations read from policies into report results.
const (
	annotationCategory = "policies.kyverno.io/category"
	annotationSeverity = "policies.kyverno.io/severity"
)

// PolicyReports builds one report per resource, as the report controller
// does in a cluster: a PolicyReport for a namespaced resource, a
// ClusterPolicyReport for a cluster-scoped one, its scope naming the
// resource. Reports come in resource order.
func PolicyReports(o *Outcome, now time.Time) []any {
	type group struct {
		ref     engine.ResourceRef
		results []policyreportv1alpha2.PolicyReportResult
	}
	var groups []*group
	index := map[engine.ResourceRef]*group{}
	for _, v := range o.Verdicts {
		g := index[v.Resource]
		if g == nil {
			g = &group{ref: v.Resource}
			index[v.Resource] = g
			groups = append(groups, g)
		}
		g.results = append(g.results, reportResult(v, now))
	}
	reports := make([]any, 0, len(groups))
	for _, g := range groups {
		scope := &corev1.ObjectReference{APIVersion: g.ref.APIVersion, Kind: g.ref.Kind, Namespace: g.ref.Namespace, Name: g.ref.Name}
		meta := metav1.ObjectMeta{
			Name:   reportName(g.ref),
			Labels: map[string]string{"app.kubernetes.io/managed-by": "charter"},
		}
		summary := policyreportv1alpha2.Summarize(g.results)
		if g.ref.Namespace == "" || manifest.IsClusterScoped(g.ref.Kind) {
			reports = append(reports, &policyreportv1alpha2.ClusterPolicyReport{
				TypeMeta:   metav1.TypeMeta{APIVersion: policyreportv1alpha2.GroupVersion.String(), Kind: "ClusterPolicyReport"},
				ObjectMeta: meta, Scope: scope, Summary: summary, Results: g.results,
			})
			continue
		}
		meta.Namespace = g.ref.Namespace
		reports = append(reports, &policyreportv1alpha2.PolicyReport{
			TypeMeta:   metav1.TypeMeta{APIVersion: policyreportv1alpha2.GroupVersion.String(), Kind: "PolicyReport"},
			ObjectMeta: meta, Scope: scope, Summary: summary, Results: g.results,
		})
	}
	return reports
}

// reportName names a report after its resource. In a cluster reports are
// named by the resource's UID; a manifest has none, so kind and name serve.
func reportName(r engine.ResourceRef) string {
	return strings.ToLower(r.Kind) + "-" + r.Name
}

func reportResult(v Verdict, now time.Time) policyreportv1alpha2.PolicyReportResult {
	r := policyreportv1alpha2.PolicyReportResult{
		Source:    "kyverno",
		Policy:    v.Policy,
		Rule:      v.Rule,
		Result:    policyreportv1alpha2.PolicyResult(v.Result),
		Message:   v.Message,
		Scored:    true,
		Timestamp: metav1.Timestamp{Seconds: now.Unix()},
	}
	if len(v.Properties) > 0 {
		r.Properties = v.Properties
	}
	if v.source != nil {
		ann := v.source.GetAnnotations()
		r.Category = ann[annotationCategory]
		switch s := policyreportv1alpha2.PolicySeverity(ann[annotationSeverity]); s {
		case policyreportv1alpha2.SeverityCritical, policyreportv1alpha2.SeverityHigh, policyreportv1alpha2.SeverityMedium,
			policyreportv1alpha2.SeverityLow, policyreportv1alpha2.SeverityInfo:
			r.Severity = s
		}
		r.Scored = ann[kyvernov1.AnnotationPolicyScored] != "false"
	}
	return r
}

// WriteReports prints reports as YAML documents separated by ---, or, for
// json, as a v1 List.
func WriteReports(w io.Writer, format string, reports []any) error {
	if format == "json" {
		return printer.WriteObject(w, "json", map[string]any{"apiVersion": "v1", "kind": "List", "items": reports})
	}
	var b bytes.Buffer
	for i, r := range reports {
		if i > 0 {
			b.WriteString("---\n")
		}
		y, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		b.Write(y)
	}
	_, err := w.Write(b.Bytes())
	return err
}
