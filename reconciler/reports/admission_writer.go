package reports

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// How long admission results wait for their resource to appear. The
// webhook sees a CREATE before the object is stored; a request another
// webhook then denies never stores it. Kyverno waits 2 minutes too.
const (
	admissionRetry   = 2 * time.Second
	admissionTimeout = 2 * time.Minute
)

// policyLag bounds how long admission results wait for the controller's
// policy set to catch up with a policy the webhook already enforces: the
// webhook's policy cache and this controller compile policies apart (and
// this one debounces), so right after a policy is added its first
// admission results can name a policy this controller has not compiled
// yet. Merging them then would drop them as results of an unknown policy.
const policyLag = 30 * time.Second

// drainAdmissionQueue turns queued admissions into pending results per
// resource; several admissions of one resource become one write.
func (c *Controller) drainAdmissionQueue(ctx context.Context, q *AdmissionQueue) {
	for {
		select {
		case <-ctx.Done():
			return
		case item := <-q.items:
			results := report.Results(item.responses, c.opts.AllowedResults, item.at)
			if len(results) == 0 {
				continue
			}
			c.mu.Lock()
			p := c.pending[item.resource.UID]
			if p == nil {
				p = &pendingAdmission{scope: item.resource, first: c.now()}
				c.pending[item.resource.UID] = p
			}
			p.results = append(p.results, results...)
			c.mu.Unlock()
			c.admission.Add(item.resource.UID)
		}
	}
}

func (c *Controller) processAdmission(ctx context.Context) bool {
	uid, quit := c.admission.Get()
	if quit {
		return false
	}
	defer c.admission.Done(uid)
	c.mu.Lock()
	p := c.pending[uid]
	delete(c.pending, uid)
	c.mu.Unlock()
	if p == nil {
		return true
	}
	retry, err := c.applyAdmission(ctx, p)
	if err != nil && ctx.Err() == nil {
		c.log.Error(err, "writing admission results", "resource", p.scope.String())
	}
	if (retry || err != nil) && ctx.Err() == nil && c.now().Sub(p.first) < admissionTimeout {
		c.mu.Lock()
		if later := c.pending[uid]; later != nil {
			later.results = append(p.results, later.results...)
			later.first = p.first
		} else {
			c.pending[uid] = p
		}
		c.mu.Unlock()
		c.admission.AddAfter(uid, admissionRetry)
	}
	return true
}

// applyAdmission merges admission results into the resource's report. It
// reports retry when the resource is not stored (yet).
func (c *Controller) applyAdmission(ctx context.Context, p *pendingAdmission) (retry bool, err error) {
	scope := p.scope
	gvr, err := c.resourceFor(scope)
	if err != nil {
		return false, err
	}
	// Locked before the lookup: the handler of the resource's deletion
	// then runs wholly before it (and the lookup finds nothing) or after
	// the write (and deletes the report), never in between.
	unlock := c.lock(scope.UID)
	defer unlock()
	ri := c.meta.Resource(gvr)
	var m *metav1.PartialObjectMetadata
	if scope.Namespace != "" {
		m, err = ri.Namespace(scope.Namespace).Get(ctx, scope.Name, metav1.GetOptions{})
	} else {
		m, err = ri.Get(ctx, scope.Name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	case m.UID != scope.UID:
		// The name now belongs to another object (or the request's object
		// was never stored and the name reused): wait, then give up.
		return true, nil
	}

	snap := c.snap.Load()
	if c.now().Sub(p.first) < policyLag && c.awaitsPolicies(snap, p.results) {
		return true, nil
	}
	existing, found, err := c.reports.get(ctx, scope)
	if err != nil {
		return false, err
	}
	desired := report.Merge(existing, p.results, snap.catalog)
	if !report.Equivalent(existing, desired) || len(existing) == 0 && len(desired) > 0 {
		if err := c.write(ctx, scope, desired, !found); err != nil {
			return false, err
		}
	}
	stored := describe(snap, desired)
	c.updateState(scope.UID, func(st *resourceState) {
		st.remember(stored)
		if st.gvr.Resource == "" {
			st.gvr = gvr
		}
	})
	return false, nil
}

func (c *Controller) resourceFor(scope report.Scope) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(scope.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("admission result for %s: %w", scope, err)
	}
	selector := gv.Group + "/" + gv.Version + "/" + scope.Kind
	if gv.Group == "" {
		selector = gv.Version + "/" + scope.Kind
	}
	types := c.kinds.resolve(selector)
	if len(types) == 0 {
		return schema.GroupVersionResource{}, fmt.Errorf("admission result for %s: kind %s is not served", scope, selector)
	}
	return types[0].GVR, nil
}

// awaitsPolicies reports whether some result names a policy that is
// installed but that the snapshot does not know with that rule yet.
// Results of policies that are gone are not waited for: the merge drops
// them.
func (c *Controller) awaitsPolicies(snap *snapshot, results []v1alpha2.PolicyReportResult) bool {
	for i := range results {
		r := &results[i]
		if snap.catalog.Has(r.Policy, r.Rule) {
			continue
		}
		// Store keys are name for ClusterPolicies and namespace/name for
		// Policies, as are policy keys in results.
		gvr := clusterPoliciesGVR
		if strings.Contains(r.Policy, "/") {
			gvr = policiesGVR
		}
		if _, installed, _ := c.policyInformers.ForResource(gvr).Informer().GetStore().GetByKey(r.Policy); installed {
			return true
		}
	}
	return false
}
