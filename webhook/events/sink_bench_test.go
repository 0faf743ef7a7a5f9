package events

import (
	"context"
	"fmt"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
)

// nullWriter accepts every event and keeps none.
type nullWriter struct{}

func (nullWriter) Create(context.Context, *eventsv1.Event) error { return nil }

// admissions are n reviews of Pods of their own names, each failing one
// rule of each of policies Enforce policies, as bench-admission's
// non-compliant Pods fail the Pod Security policies.
func admissions(n, policies int, blocked bool) []Admission {
	ps := make([]*kyvernov1.ClusterPolicy, policies)
	for i := range ps {
		ps[i] = &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("policy-%d", i), UID: "uid"}}
	}
	out := make([]Admission, n)
	for i := range out {
		name := fmt.Sprintf("pod-%d", i)
		resp := &engine.Response{Resource: engine.ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: "bench", Name: name}}
		for _, p := range ps {
			resp.Policies = append(resp.Policies, engine.PolicyResponse{Policy: p, Key: p.Name, Rules: []engine.RuleResponse{
				fail("check", "validation error: Privileged mode is disallowed. rule check failed at path /spec/containers/0/securityContext/privileged/", engine.Enforce),
				pass("other", engine.Audit),
			}})
		}
		req := &engine.Request{Object: map[string]any{"metadata": map[string]any{"name": name, "uid": "uid-" + name}}}
		out[i] = Admission{Request: req, Responses: []*engine.Response{resp}, Blocked: blocked}
	}
	return out
}

// BenchmarkSinkAdmission is the sink's work per admission review that
// failed 17 policies, past the spam filter's burst (every event about a
// policy held back), as in bench-admission's measured rounds: what it
// allocates before the filter drops the events is pure waste.
func BenchmarkSinkAdmission(b *testing.B) {
	for _, blocked := range []bool{true, false} {
		b.Run(fmt.Sprintf("blocked=%v", blocked), func(b *testing.B) {
			batches := admissions(1000, 17, blocked)
			s := NewSink(Options{Writer: nullWriter{}, Omit: DefaultOmit})
			ctx := context.Background()
			// Spend the burst of every policy first.
			for _, a := range batches[:100] {
				s.writeBatch(ctx, a)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				s.writeBatch(ctx, batches[i%len(batches)])
			}
		})
	}
}
