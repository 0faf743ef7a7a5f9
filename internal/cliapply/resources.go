package cliapply

import (
	"context"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/engine"
)

// producedObjects are what mutate and generate rules made of one document.
type producedObjects struct {
	mutated, generated []map[string]any
}

// evaluateObject runs mutation, then validation of the mutated object, then
// generation, and records the mutated object (when a rule changed it) and
// the generated objects. The responses come back in the shape verdictsOf
// reads.
func (e *evaluator) evaluateObject(ctx context.Context, obj *unstructured.Unstructured, produced *producedObjects) (mutation, validation, generation *engine.Response) {
	ev := e.set.Evaluate(ctx, e.request(obj.Object), e.opts...)
	m := ev.Mutation
	if len(m.Patch) > 0 {
		produced.mutated = append(produced.mutated, m.Object)
	}
	g := e.set.Generate(ctx, e.request(m.Object), e.opts...)
	for _, d := range g.Objects() {
		produced.generated = append(produced.generated, d.Object)
	}
	return &engine.Response{Resource: m.Resource, Policies: m.Policies},
		ev.Validation,
		&engine.Response{Resource: g.Resource, Policies: g.Policies}
}

// WriteResources prints the mutated resources and then the generated
// objects as a multi-document YAML stream, each introduced by a comment
// saying which it is.
func WriteResources(w io.Writer, o *Outcome) error {
	write := func(what string, objs []map[string]any) error {
		for _, obj := range objs {
			b, err := yaml.Marshal(obj)
			if err != nil {
				return err
			}
			u := unstructured.Unstructured{Object: obj}
			if _, err := fmt.Fprintf(w, "---\n# %s %s/%s %s\n%s", what, u.GetAPIVersion(), u.GetKind(), name(u), b); err != nil {
				return err
			}
		}
		return nil
	}
	if err := write("mutated", o.Mutated); err != nil {
		return err
	}
	return write("generated", o.Generated)
}

func name(u unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// imageBlocked reports whether a verifyImages rule of the mutating phase
// denies the request: an Enforce fail, or an error (the CLI fails
// closed).
func imageBlocked(m *engine.Response) bool {
	for _, p := range m.Policies {
		for _, r := range p.Rules {
			if r.Type == engine.TypeImageVerify && r.Action == engine.Enforce && (r.Status == engine.StatusFail || r.Status == engine.StatusError) {
				return true
			}
		}
	}
	return false
}
