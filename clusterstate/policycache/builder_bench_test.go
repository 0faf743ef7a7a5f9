package policycache

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// fiveHundred returns 500 ClusterPolicies made from charter's policy
// library, each copy under its own name and UID, as a large GitOps
// repository would install them.
func fiveHundred(b *testing.B) []kyvernov1.PolicyInterface {
	lib := loadLibrary(b)
	out := make([]kyvernov1.PolicyInterface, 0, 500)
	for i := 0; len(out) < 500; i++ {
		p := lib.policies[i%len(lib.policies)].CreateDeepCopy()
		obj := p.(metav1.Object)
		obj.SetName(fmt.Sprintf("%s-%03d", obj.GetName(), i))
		obj.SetUID(types.UID(fmt.Sprintf("uid-%03d", i)))
		out = append(out, p)
	}
	return out
}

// BenchmarkRecompileOneOf500 is the admission cache's steady state: one
// policy of 500 changes, and the next snapshot is built.
func BenchmarkRecompileOneOf500(b *testing.B) {
	policies := fiveHundred(b)
	builder := NewBuilder()
	if _, stats := builder.Build(policies, nil); stats.PoliciesCompiled != 500 {
		b.Fatalf("first build compiled %d policies", stats.PoliciesCompiled)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		j := i % len(policies)
		policies[j] = edit(policies[j], true, func(kyvernov1.PolicyInterface) {})
		s, stats := builder.Build(policies, nil)
		if stats.PoliciesCompiled != 1 || !stats.Changed || len(s.Policies()) != 500 {
			b.Fatalf("build %d: compiled %d, changed %v, %d policies", i, stats.PoliciesCompiled, stats.Changed, len(s.Policies()))
		}
		i++
	}
}

// BenchmarkFullCompileOf500 is what every change cost before units were
// kept: the whole snapshot compiled from scratch.
func BenchmarkFullCompileOf500(b *testing.B) {
	policies := fiveHundred(b)
	b.ReportAllocs()
	for b.Loop() {
		s, stats := NewBuilder().Build(policies, nil)
		if stats.PoliciesCompiled != 500 || len(s.Policies()) != 500 {
			b.Fatalf("compiled %d, %d policies", stats.PoliciesCompiled, len(s.Policies()))
		}
	}
}

// BenchmarkUnchangedOf500 is a rebuild that finds nothing changed (an
// informer resync, a status write that slipped through): it compiles and
// assembles nothing.
func BenchmarkUnchangedOf500(b *testing.B) {
	policies := fiveHundred(b)
	builder := NewBuilder()
	builder.Build(policies, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, stats := builder.Build(policies, nil); stats.Changed {
			b.Fatal("changed")
		}
	}
}
