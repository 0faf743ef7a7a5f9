package reports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// FieldManager is the field manager of charter's report writes.
const FieldManager = "charter-reports"

// reportClient reads and writes the report of one resource, in each
// report API charter writes (--reports-api). Reads and deletes go through
// the dynamic client; creates and updates send the encoded report through
// the API's raw client, which asks for only the stored object's metadata
// back, of which only the resourceVersion is decoded: at 10,000 reports,
// decoding the full echo of each write was a quarter of the controller's
// CPU.
//
// The first API is the primary one: get reads it and write's condition
// is on its resourceVersion, so every writer merges into the primary
// report. Each further API (OpenReports, with --reports-api=both) holds a
// copy that follows the primary report: after each write of the primary
// report, the copy is made to hold what the primary report holds then
// (follow), and the sweep repairs copies that lag (syncCopies).
type reportClient struct {
	dyn  dynamic.Interface
	apis []apiClient
	// managedBy is the app.kubernetes.io/managed-by label of the reports
	// written, and of those listed as charter's (Options.ManagedBy).
	managedBy string
	log       logr.Logger
}

// apiClient writes the reports of one API.
type apiClient struct {
	api policyreport.API
	raw rest.Interface
}

func newReportClient(cfg *rest.Config, dyn dynamic.Interface, apis []policyreport.API, managedBy string, log logr.Logger) (reportClient, error) {
	if len(apis) == 0 {
		apis = []policyreport.API{policyreport.WGPolicyK8s}
	}
	if managedBy == "" {
		managedBy = report.ManagedBy
	}
	rc := reportClient{dyn: dyn, managedBy: managedBy, log: log}
	for _, api := range apis {
		raw, err := newRawClient(cfg, api.GroupVersion())
		if err != nil {
			return reportClient{}, err
		}
		rc.apis = append(rc.apis, apiClient{api: api, raw: raw})
	}
	return rc, nil
}

// newRawClient returns a REST client for the group and version that
// shares cfg's rate limiter.
func newRawClient(cfg *rest.Config, gv schema.GroupVersion) (rest.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = clientscheme.Codecs.WithoutConversion()
	return rest.RESTClientFor(cfg)
}

// primary is the API charter reads its reports back from.
func (c reportClient) primary() apiClient { return c.apis[0] }

// copies are the APIs whose reports follow the primary ones.
func (c reportClient) copies() []apiClient { return c.apis[1:] }

// metadataOnly asks the API server to answer a write with the object's
// metadata alone.
const metadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

func (a apiClient) path(scope report.Scope, name string) *rest.Request {
	req := a.raw.Get()
	if scope.Namespace != "" {
		req = req.Namespace(scope.Namespace)
	}
	req = req.Resource(scope.ReportResource(a.api).Resource)
	if name != "" {
		req = req.Name(name)
	}
	// The body is encoded from charter's own types, so it has no unknown
	// or duplicate fields to warn about: fieldValidation=Ignore spares the
	// API server the strict second decode it runs by default to find them.
	return req.SetHeader("Accept", metadataOnly).Param("fieldValidation", "Ignore")
}

func (c reportClient) resource(a apiClient, scope report.Scope) dynamic.ResourceInterface {
	ri := c.dyn.Resource(scope.ReportResource(a.api))
	if scope.Namespace == "" {
		return ri
	}
	return ri.Namespace(scope.Namespace)
}

// errConflict says the stored report is not the one a write was based
// on: it changed, appeared or went away since it was read. Another writer
// (an admission replica, or a second leader) got there first; the caller
// reads the report again and merges.
var errConflict = errors.New("the report changed since it was read")

// get returns the primary report's results and resourceVersion, and false
// when there is no report.
func (c reportClient) get(ctx context.Context, scope report.Scope) ([]v1alpha2.PolicyReportResult, string, bool, error) {
	p, rv, err := c.getIn(ctx, c.primary(), scope)
	if p == nil || err != nil {
		return nil, "", false, err
	}
	return p.Results, rv, true, nil
}

// getIn reads the resource's report in one API: nil when there is none.
func (c reportClient) getIn(ctx context.Context, a apiClient, scope report.Scope) (*report.Parsed, string, error) {
	u, err := c.resource(a, scope).Get(ctx, scope.ReportName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading the %s of %s: %w", scope.ReportKind(a.api), scope, err)
	}
	p, err := report.Parse(u)
	if err != nil {
		return nil, "", err
	}
	return p, u.GetResourceVersion(), nil
}

// write makes the primary report hold exactly the results, provided it is
// still the one at resourceVersion rv; rv "" says there is no report. It
// creates the report when there is none, replaces it (PUT with rv as
// precondition) otherwise, and deletes it when there are no results
// (Kyverno deletes empty reports). It returns the new resourceVersion (""
// after a delete), or errConflict when the stored report is not the one at
// rv. The copies in the other APIs then follow.
//
// Every write is conditional because several processes write reports:
// the leader's scans and each replica's admission results. A blind write
// would drop what another wrote in between.
func (c reportClient) write(ctx context.Context, scope report.Scope, results []v1alpha2.PolicyReportResult, rv string) (string, error) {
	newRV, err := c.writeIn(ctx, c.primary(), scope, results, rv)
	if err != nil {
		return "", err
	}
	for _, a := range c.copies() {
		if err := c.follow(ctx, a, scope); err != nil && ctx.Err() == nil {
			// The primary report is right; the copy catches up at the
			// next write of the report or the next sweep.
			c.log.Error(err, "the copy of a report lags", "api", a.api, "resource", scope.String())
		}
	}
	return newRV, nil
}

// writeIn is write in one API, with no copies.
func (c reportClient) writeIn(ctx context.Context, a apiClient, scope report.Scope, results []v1alpha2.PolicyReportResult, rv string) (string, error) {
	if len(results) == 0 {
		if rv == "" {
			return "", nil
		}
		return "", c.deleteAt(ctx, a, scope, rv)
	}
	body := report.JSON(a.api, c.managedBy, scope, results, rv)
	var req *rest.Request
	if rv == "" {
		req = a.path(scope, "").Verb(http.MethodPost)
	} else {
		req = a.path(scope, scope.ReportName()).Verb(http.MethodPut)
	}
	raw, err := req.SetHeader("Content-Type", "application/json").
		Param("fieldManager", FieldManager).
		Body(body).Do(ctx).Raw()
	switch {
	case err == nil:
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err), rv != "" && apierrors.IsNotFound(err):
		return "", errConflict
	default:
		return "", fmt.Errorf("writing the %s of %s: %w", scope.ReportKind(a.api), scope, err)
	}
	// The answer is the stored object's metadata only (see metadataOnly);
	// the resourceVersion is all that is read from it.
	var stored struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &stored); err != nil || stored.Metadata.ResourceVersion == "" {
		return "", fmt.Errorf("writing the %s of %s: no resourceVersion in the answer (%v)", scope.ReportKind(a.api), scope, err)
	}
	return stored.Metadata.ResourceVersion, nil
}

// follow makes the resource's report in API a hold what its primary
// report holds, or removes it when there is no primary report. The copy
// is read before the primary report and written on condition that it is
// unchanged, so of two writers copying at once the one that read the
// older primary report loses the race and copies again: the last copy
// written holds a primary report at least as new as any copied before.
func (c reportClient) follow(ctx context.Context, a apiClient, scope report.Scope) error {
	for attempt := 0; ; attempt++ {
		copied, copyRV, err := c.getIn(ctx, a, scope)
		if err != nil {
			return err
		}
		primary, _, err := c.getIn(ctx, c.primary(), scope)
		if err != nil {
			return err
		}
		var results []v1alpha2.PolicyReportResult
		if primary != nil {
			results = primary.Results
			scope = primary.Scope
		}
		if copied != nil && report.Equivalent(copied.Results, results) {
			return nil
		}
		_, err = c.writeIn(ctx, a, scope, results, copyRV)
		if !errors.Is(err, errConflict) || attempt == maxConflicts {
			return err
		}
	}
}

// deleteAt deletes the report in one API if it is still at
// resourceVersion rv.
func (c reportClient) deleteAt(ctx context.Context, a apiClient, scope report.Scope, rv string) error {
	err := c.resource(a, scope).Delete(ctx, scope.ReportName(), metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{ResourceVersion: &rv},
	})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return errConflict
	}
	return fmt.Errorf("deleting the %s of %s: %w", scope.ReportKind(a.api), scope, err)
}

// delete deletes the report in every API whatever it holds: its resource
// is gone.
func (c reportClient) delete(ctx context.Context, scope report.Scope) error {
	var errs []error
	for _, a := range c.apis {
		err := c.resource(a, scope).Delete(ctx, scope.ReportName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting the %s of %s: %w", scope.ReportKind(a.api), scope, err))
		}
	}
	return errors.Join(errs...)
}

// anyCachedVersion asks a list for whatever the API server's watch cache
// holds, however fresh: any resourceVersion is not older than the first.
const anyCachedVersion = "1"

// list calls fn for every primary report charter manages, a page at a time, both
// kinds at once, so fn must be safe for concurrent use. The
// list comes from the API server's watch cache without waiting for it to
// catch up with etcd: a report it shows older than stored is harmless,
// since every write is conditional on the version read, and a stale one
// is read again when a write finds it changed.
func (c reportClient) list(ctx context.Context, pageSize int64, fn func(u *unstructured.Unstructured) error) error {
	return c.listIn(ctx, c.primary(), pageSize, fn)
}

// listIn is list in one API.
func (c reportClient) listIn(ctx context.Context, a apiClient, pageSize int64, fn func(u *unstructured.Unstructured) error) error {
	// Both kinds at once: fn must be safe for concurrent use.
	gvrs := []schema.GroupVersionResource{a.api.Resource(false), a.api.Resource(true)}
	errs := make([]error, len(gvrs))
	var wg sync.WaitGroup
	for i, gvr := range gvrs {
		wg.Go(func() {
			err := listPages(ctx, c.dyn.Resource(gvr), pageSize, report.ManagedByLabel+"="+c.managedBy, anyCachedVersion, func(items []unstructured.Unstructured) error {
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
		if opts.Continue != "" && apierrors.IsResourceExpired(err) {
			// A list that takes longer than etcd's compaction interval
			// (5 minutes by default; a scan of 50,000 Pods on a busy API
			// server does) loses its consistent snapshot. The API server
			// then hands back a token that goes on from the same key at the
			// current version: the rest of the list, inconsistent with its
			// start. A scan or a sweep takes it: what changed meanwhile
			// also reaches the controller through its watch.
			if next := expiredContinue(err); next != "" {
				opts.Continue = next
				page, err = ri.List(ctx, opts)
			}
		}
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

// expiredContinue is the token an API server's 410 for an expired
// continuation carries to list the remainder inconsistently, or "".
func expiredContinue(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return ""
	}
	return status.Status().ListMeta.Continue
}
