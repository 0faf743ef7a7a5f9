package generate

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// Targets describes what a generate rule writes: one line per pattern (the
// rule's own, or each foreach entry's), naming the generated object's
// apiVersion, kind, namespace and name, and the clone source or cloneList
// selection it copies. Two versions of a rule write to the same objects
// exactly when their Targets are equal; the rule's data, synchronize,
// generateExisting and orphan settings are not part of it.
//
// This is Kyverno's "generate rule pattern" (background-cleanup.md §3.4),
// with the foreach entries' targets added: Kyverno leaves those out, so a
// foreach entry that starts writing to another object goes unnoticed there.
func Targets(g *kyvernov1.Generation) []string {
	if g == nil {
		return nil
	}
	if len(g.ForEachGeneration) == 0 {
		return []string{describePattern(&g.GeneratePattern)}
	}
	out := make([]string, 0, len(g.ForEachGeneration))
	for i := range g.ForEachGeneration {
		out = append(out, fmt.Sprintf("foreach[%d] %s", i, describePattern(&g.ForEachGeneration[i].GeneratePattern)))
	}
	return out
}

// TargetsChanged reports whether a new version of a generate rule writes to
// other objects than the old one did (see Targets).
func TargetsChanged(old, cur *kyvernov1.Generation) bool {
	return !slices.Equal(Targets(old), Targets(cur))
}

func describePattern(p *kyvernov1.GeneratePattern) string {
	object := func() string {
		s := p.Kind
		if p.APIVersion != "" {
			s = p.APIVersion + " " + s
		}
		if p.Namespace != "" {
			return s + " " + p.Namespace + "/" + p.Name
		}
		return s + " " + p.Name
	}
	switch {
	case len(p.CloneList.Kinds) > 0 || p.CloneList.Namespace != "":
		s := fmt.Sprintf("cloneList of %s in namespace %q", strings.Join(p.CloneList.Kinds, ","), p.CloneList.Namespace)
		if p.CloneList.Selector != nil {
			s += " selected by " + metav1.FormatLabelSelector(p.CloneList.Selector)
		}
		if p.Namespace != "" {
			s += " into namespace " + p.Namespace
		}
		return s
	case p.Clone.Name != "" || p.Clone.Namespace != "":
		return fmt.Sprintf("%s cloned from %s/%s", object(), p.Clone.Namespace, p.Clone.Name)
	default:
		return object()
	}
}
