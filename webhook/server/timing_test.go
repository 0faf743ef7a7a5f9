package server

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/webhook/metrics"
)

// With metrics on, validateSet answers what it answers without them, and
// records a duration sample per rule.
func TestValidateSetTimesEachPolicy(t *testing.T) {
	snapshot := testSnapshot(t)
	reg := prometheus.NewRegistry()
	rec, err := metrics.New(reg, "test")
	if err != nil {
		t.Fatal(err)
	}
	timed := &handlers{opts: Options{Metrics: rec}}
	plain := &handlers{}
	bad := compliant()
	bad.image = "nginx"
	bad.labels = nil
	for _, p := range []pod{compliant(), bad} {
		var review unstructuredReview
		if err := parseReview(p.review(), &review); err != nil {
			t.Fatal(err)
		}
		req, err := plain.engineRequest(context.Background(), review.Request, snapshot)
		if err != nil {
			t.Fatal(err)
		}
		mreq := metricsRequest(review.Request, metrics.Validating)
		want := plain.validateSet(context.Background(), snapshot.Fail, req)
		got := timed.validateSet(context.Background(), snapshot.Fail, req)
		timed.observeSet(got, mreq)
		if !reflect.DeepEqual(summary(got), summary(want)) || got.Resource != want.Resource {
			t.Errorf("%s: timed response\n%v %v\nwant\n%v %v", p.name, got.Resource, summary(got), want.Resource, summary(want))
		}
	}
	n, err := testutil.GatherAndCount(reg, metrics.PolicyExecutionDuration)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no kyverno_policy_execution_duration_seconds series")
	}
	text, err := testutil.GatherAndLint(reg, metrics.PolicyExecutionDuration)
	if err != nil || len(text) > 0 {
		t.Errorf("lint: %v %v", err, text)
	}
}

func summary(r *engine.Response) []string {
	var out []string
	for _, p := range r.Policies {
		for _, rr := range p.Rules {
			out = append(out, strings.Join([]string{p.Key, rr.Name, string(rr.Status), rr.Message}, "|"))
		}
	}
	return out
}
