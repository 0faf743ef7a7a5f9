package reports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// FieldManager is the field manager of charter's report writes.
const FieldManager = "charter-reports"

var (
	policyReportsGVR        = v1alpha2.GroupVersion.WithResource("policyreports")
	clusterPolicyReportsGVR = v1alpha2.GroupVersion.WithResource("clusterpolicyreports")
)

// reportClient reads and writes the report of one resource. Reads and
// deletes go through the dynamic client; creates and updates send the
// encoded report through raw, which asks for only the stored object's
// metadata back, of which only the resourceVersion is decoded: at 10,000
// reports, decoding the full echo of each write was a quarter of the
// controller's CPU.
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
	req := c.raw.Get()
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

// errConflict says the stored report is not the one a write was based
// on: it changed, appeared or went away since it was read. Another writer
// (an admission replica, or a second leader) got there first; the caller
// reads the report again and merges.
var errConflict = errors.New("the report changed since it was read")

// get returns the report's results and resourceVersion, and false when
// there is no report.
func (c reportClient) get(ctx context.Context, scope report.Scope) ([]v1alpha2.PolicyReportResult, string, bool, error) {
	u, err := c.resource(scope).Get(ctx, scope.ReportName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, fmt.Errorf("reading the report of %s: %w", scope, err)
	}
	p, err := report.Parse(u)
	if err != nil {
		return nil, "", false, err
	}
	return p.Results, u.GetResourceVersion(), true, nil
}

// write makes the report hold exactly the results, provided the stored
// report is still the one at resourceVersion rv; rv "" says there is no
// report. It creates the report when there is none, replaces it (PUT with
// rv as precondition) otherwise, and deletes it when there are no results
// (Kyverno deletes empty reports). It returns the new resourceVersion ("" after a
// delete), or errConflict when the stored report is not the one at rv.
//
// Every write is conditional because several processes write reports:
// the leader's scans and each replica's admission results. A blind write
// would drop what another wrote in between.
func (c reportClient) write(ctx context.Context, scope report.Scope, results []v1alpha2.PolicyReportResult, rv string) (string, error) {
	if len(results) == 0 {
		if rv == "" {
			return "", nil
		}
		return "", c.deleteAt(ctx, scope, rv)
	}
	body := report.JSON(scope, results, rv)
	var req *rest.Request
	if rv == "" {
		req = c.path(scope, "").Verb(http.MethodPost)
	} else {
		req = c.path(scope, scope.ReportName()).Verb(http.MethodPut)
	}
	raw, err := req.SetHeader("Content-Type", "application/json").
		Param("fieldManager", FieldManager).
		Body(body).Do(ctx).Raw()
	switch {
	case err == nil:
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err), rv != "" && apierrors.IsNotFound(err):
		return "", errConflict
	default:
		return "", fmt.Errorf("writing the report of %s: %w", scope, err)
	}
	// The answer is the stored object's metadata only (see metadataOnly);
	// the resourceVersion is all that is read from it.
	var stored struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &stored); err != nil || stored.Metadata.ResourceVersion == "" {
		return "", fmt.Errorf("writing the report of %s: no resourceVersion in the answer (%v)", scope, err)
	}
	return stored.Metadata.ResourceVersion, nil
}

// deleteAt deletes the report if it is still at resourceVersion rv.
func (c reportClient) deleteAt(ctx context.Context, scope report.Scope, rv string) error {
	err := c.resource(scope).Delete(ctx, scope.ReportName(), metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{ResourceVersion: &rv},
	})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return errConflict
	}
	return fmt.Errorf("deleting the report of %s: %w", scope, err)
}

// delete deletes the report whatever it holds: its resource is gone.
func (c reportClient) delete(ctx context.Context, scope report.Scope) error {
	err := c.resource(scope).Delete(ctx, scope.ReportName(), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the report of %s: %w", scope, err)
	}
	return nil
}

// anyCachedVersion asks a list for whatever the API server's watch cache
// holds, however fresh: any resourceVersion is not older than the first.
const anyCachedVersion = "1"

// list calls fn for every report charter manages, a page at a time, both
// kinds at once, so fn must be safe for concurrent use. The
// list comes from the API server's watch cache without waiting for it to
// catch up with etcd: a report it shows older than stored is harmless,
// since every write is conditional on the version read, and a stale one
// is read again when a write finds it changed.
func (c reportClient) list(ctx context.Context, pageSize int64, fn func(u *unstructured.Unstructured) error) error {
	// Both kinds at once: fn must be safe for concurrent use.
	gvrs := []schema.GroupVersionResource{policyReportsGVR, clusterPolicyReportsGVR}
	errs := make([]error, len(gvrs))
	var wg sync.WaitGroup
	for i, gvr := range gvrs {
		wg.Go(func() {
			err := listPages(ctx, c.dyn.Resource(gvr), pageSize, report.ManagedByLabel+"="+report.ManagedBy, anyCachedVersion, func(items []unstructured.Unstructured) error {
				for i := range items {
					if err := fn(&items[i]); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				errs[i] = fmt.Errorf("listing %s: %w", gvr.Resource, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// listPages lists a resource in pages so that no more than one page of
// full objects is held at a time. The list is at least as new as
// resourceVersion notOlderThan; "" asks for a consistent read, which the
// API server serves only once its watch cache has caught up with etcd (up
// to a second or two on a busy control plane for a resource that has seen
// no events lately).
func listPages(ctx context.Context, ri dynamic.NamespaceableResourceInterface, pageSize int64, selector, notOlderThan string, fn func(items []unstructured.Unstructured) error) error {
	opts := metav1.ListOptions{Limit: pageSize, LabelSelector: selector}
	if notOlderThan != "" {
		opts.ResourceVersion, opts.ResourceVersionMatch = notOlderThan, metav1.ResourceVersionMatchNotOlderThan
	}
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
		// The continuation carries the first page's version.
		opts.Continue = page.GetContinue()
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
}
