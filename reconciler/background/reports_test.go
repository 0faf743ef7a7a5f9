package background

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr/testr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/reconciler/reports"
)

// startControllerWithReports runs a background controller whose results
// go through a reports admission queue and writer into the triggers'
// PolicyReports, as charter serve wires them in the background process.
func (e *env) startControllerWithReports(opts Options) *Controller {
	e.t.Helper()
	q := reports.NewAdmissionQueue(0)
	opts.Results = q
	c, state := e.startController(opts)
	w, err := reports.NewAdmissionWriter(e.cp.RESTConfig(), reports.Options{Admission: q, State: state, Logger: testr.New(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("report writer: %v", err)
		}
	})
	return c
}

// reportProperty returns a property of the result of a policy in the
// report of a resource (a PolicyReport in namespace, or a
// ClusterPolicyReport when namespace is ""), after checking the result's
// source, rule and outcome.
func (e *env) reportProperty(namespace string, uid types.UID, source, policy, rule, result, property string) (string, error) {
	r := &unstructured.Unstructured{}
	r.SetAPIVersion("wgpolicyk8s.io/v1alpha2")
	r.SetKind("PolicyReport")
	if namespace == "" {
		r.SetKind("ClusterPolicyReport")
	}
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: namespace, Name: string(uid)}, r); err != nil {
		return "", err
	}
	results, _, _ := unstructured.NestedSlice(r.Object, "results")
	var seen []string
	for _, item := range results {
		m, _ := item.(map[string]any)
		if m["source"] != source || m["policy"] != policy {
			seen = append(seen, fmt.Sprintf("%v/%v/%v", m["source"], m["policy"], m["rule"]))
			continue
		}
		if got, _ := m["rule"].(string); got != rule || m["result"] != result {
			return "", fmt.Errorf("result of %s: rule %q result %v (message %v), want rule %q result %s", policy, got, m["result"], m["message"], rule, result)
		}
		props, _ := m["properties"].(map[string]any)
		v, _ := props[property].(string)
		return v, nil
	}
	return "", fmt.Errorf("no %s result of %s in the report of %s (results: %s)", source, policy, uid, strings.Join(seen, ", "))
}
