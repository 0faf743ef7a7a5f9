package server

import (
	"context"
	"reflect"
	"testing"

	"github.com/charter-dev/charter/webhook/metrics"
)

// TestDecidersAnswerAsServed calls each path's decider directly, without
// the transport, and wants the response the served path encodes: the
// transport decodes, measures and encodes, and decides nothing.
func TestDecidersAnswerAsServed(t *testing.T) {
	latest := compliant()
	latest.image = "nginx"
	unlabelled := compliant()
	unlabelled.labels = nil
	deletion := compliant()
	deletion.operation = "DELETE"
	opts := Options{Policies: staticSnapshots{testSnapshot(t)}, Mutator: &fakeMutator{}}
	h := &handlers{opts: opts}
	served := NewHandler(opts)
	tests := []struct {
		name string
		path string
		d    decider
		pod  pod
	}{
		{"compliant Pod validated", PathValidateFail, validator{h, scopeFail}, compliant()},
		{"latest tag validated", PathValidateFail, validator{h, scopeFail}, latest},
		{"unlabelled Pod validated on both sets", PathValidate, validator{h, scopeAll}, unlabelled},
		{"unknown fine-grained policy", PathValidateFail + FineGrainedSegment + "gone", validator{h, scopeFineGrained}, compliant()},
		{"Pod mutated", PathMutateFail, mutator{h, scopeFail}, compliant()},
		{"DELETE not mutated", PathMutate, mutator{h, scopeAll}, deletion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.pod.review()
			var review unstructuredReview
			if err := parseReview(body, &review); err != nil {
				t.Fatal(err)
			}
			rr := reviewRequest{ar: review.Request, path: tc.path, metrics: metricsRequest(review.Request, metrics.Validating)}
			got := tc.d.Handle(context.Background(), rr)
			want := decision(t, served, tc.path, body)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decider answered %+v, served path %+v", got, want)
			}
		})
	}
}
