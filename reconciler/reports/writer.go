package reports

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// FieldManager is the server-side apply field manager of charter's reports.
const FieldManager = "charter-reports"

var (
	policyReportsGVR        = v1alpha2.GroupVersion.WithResource("policyreports")
	clusterPolicyReportsGVR = v1alpha2.GroupVersion.WithResource("clusterpolicyreports")
)

// reportClient reads and writes the report of one resource. Reads and
// deletes go through the dynamic client; creates and applies send the
// encoded report through raw, which asks for only the stored object's
// metadata back (the answer is not decoded either): at 10,000 reports,
// decoding the full echo of each write was a quarter of the controller's
// CPU.
type reportClient struct {
	dyn dynamic.Interface
	raw rest.Interface
}

// newRawClient returns a REST client for wgpolicyk8s.io/v1alpha2 that
// shares cfg's rate limiter.
func newRawClient(cfg *rest.Config) (rest.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &v1alpha2.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = clientscheme.Codecs.WithoutConversion()
	return rest.RESTClientFor(cfg)
}

// metadataOnly asks the API server to answer a write with the object's
// metadata alone.
const metadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

func (c reportClient) path(scope report.Scope, name string) *rest.Request {
	req := c.raw.Post()
	if scope.Namespace == "" {
		req = req.Resource(clusterPolicyReportsGVR.Resource)
	} else {
		req = req.Namespace(scope.Namespace).Resource(policyReportsGVR.Resource)
	}
	if name != "" {
		req = req.Name(name)
	}
	// The body is encoded from charter's own types, so it has no unknown
	// or duplicate fields to warn about: fieldValidation=Ignore spares the
	// API server the strict second decode it runs by default to find them.
	return req.SetHeader("Accept", metadataOnly).Param("fieldValidation", "Ignore")
}

func (c reportClient) resource(scope report.Scope) dynamic.ResourceInterface {
	if scope.Namespace == "" {
		return c.dyn.Resource(clusterPolicyReportsGVR)
	}
	return c.dyn.Resource(policyReportsGVR).Namespace(scope.Namespace)
}

// get returns the report's results, and false when there is no report.
func (c reportClient) get(ctx context.Context, scope report.Scope) ([]v1alpha2.PolicyReportResult, bool, error) {
	u, err := c.resource(scope).Get(ctx, scope.ReportName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading the report of %s: %w", scope, err)
	}
	p, err := report.Parse(u)
	if err != nil {
		return nil, false, err
	}
	return p.Results, true, nil
}

// write makes the report hold exactly the results: it creates the report
// when it is known not to exist (a create costs the API server far less
// than an apply), applies it otherwise, and deletes it when there are no
// results (Kyverno deletes empty reports).
func (c reportClient) write(ctx context.Context, scope report.Scope, results []v1alpha2.PolicyReportResult, absent bool) error {
	if len(results) == 0 {
		return c.delete(ctx, scope)
	}
	body := report.JSON(scope, results)
	if absent {
		err := c.path(scope, "").
			SetHeader("Content-Type", "application/json").
			Param("fieldManager", FieldManager).
			Body(body).Do(ctx).Error()
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the report of %s: %w", scope, err)
		}
	}
	err := c.path(scope, scope.ReportName()).Verb(http.MethodPatch).
		SetHeader("Content-Type", string(types.ApplyPatchType)).
		Param("fieldManager", FieldManager).Param("force", "true").
		Body(body).Do(ctx).Error()
	if err != nil {
		return fmt.Errorf("writing the report of %s: %w", scope, err)
	}
	return nil
}

func (c reportClient) delete(ctx context.Context, scope report.Scope) error {
	err := c.resource(scope).Delete(ctx, scope.ReportName(), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the report of %s: %w", scope, err)
	}
	return nil
}

// list calls fn for every report charter manages, a page at a time.
func (c reportClient) list(ctx context.Context, pageSize int64, fn func(u *unstructured.Unstructured) error) error {
	for _, gvr := range []schema.GroupVersionResource{policyReportsGVR, clusterPolicyReportsGVR} {
		err := listPages(ctx, c.dyn.Resource(gvr), pageSize, report.ManagedByLabel+"="+report.ManagedBy, func(items []unstructured.Unstructured) error {
			for i := range items {
				if err := fn(&items[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("listing %s: %w", gvr.Resource, err)
		}
	}
	return nil
}

// listPages lists a resource in pages so that no more than one page of
// full objects is held at a time.
func listPages(ctx context.Context, ri dynamic.NamespaceableResourceInterface, pageSize int64, selector string, fn func(items []unstructured.Unstructured) error) error {
	opts := metav1.ListOptions{Limit: pageSize, LabelSelector: selector}
	for {
		page, err := ri.List(ctx, opts)
		if err != nil {
			return err
		}
		if err := fn(page.Items); err != nil {
			return err
		}
		if page.GetContinue() == "" {
			return nil
		}
		opts.Continue = page.GetContinue()
	}
}
