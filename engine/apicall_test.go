package engine

import (
	"context"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
)

// recordingAPI answers every call with answer and keeps the calls.
type recordingAPI struct {
	answer any
	calls  []loader.APICall
}

func (r *recordingAPI) Call(_ context.Context, c loader.APICall) (any, error) {
	r.calls = append(r.calls, c)
	return r.answer, nil
}

// TestServiceCallHeaders: an apiCall's service headers reach the loader in
// order, their values with variables substituted.
func TestServiceCallHeaders(t *testing.T) {
	var p kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: service-headers}
spec:
  validationFailureAction: Enforce
  background: false
  rules:
  - name: allowed
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - name: verdict
      apiCall:
        method: POST
        data: [{key: image, value: "{{ request.object.spec.containers[0].image }}"}]
        service:
          url: https://checker.policy.svc/check
          headers:
          - {key: Authorization, value: "Bearer {{ request.object.metadata.labels.team }}"}
          - {key: X-Static, value: plain}
        jmesPath: allowed
    validate:
      message: "not allowed"
      deny:
        conditions:
          all:
          - {key: "{{ verdict }}", operator: Equals, value: false}
`), &p); err != nil {
		t.Fatal(err)
	}
	set, err := Compile([]kyvernov1.PolicyInterface{&p})
	if err != nil {
		t.Fatal(err)
	}
	api := &recordingAPI{answer: map[string]any{"allowed": false}}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "web", "namespace": "default", "labels": map[string]any{"team": "t0ken"}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}}}
	resp := set.Validate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: pod}, WithLoaders(loader.Loaders{APICalls: api}))
	if len(resp.Policies) != 1 || resp.Policies[0].Rules[0].Status != review.StatusFail {
		t.Fatalf("responses %+v, want the rule to fail on the service's answer", resp.Policies)
	}
	if len(api.calls) != 1 {
		t.Fatalf("%d calls", len(api.calls))
	}
	want := []loader.APICallHeader{{Key: "Authorization", Value: "Bearer t0ken"}, {Key: "X-Static", Value: "plain"}}
	if got := api.calls[0].Headers; !reflect.DeepEqual(got, want) {
		t.Errorf("headers %+v, want %+v", got, want)
	}
}
