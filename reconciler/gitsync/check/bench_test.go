package check

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

// BenchmarkBuildAndCheck500 builds and checks a plain folder of 500
// policies, the in-process half of `make bench-gitops`' large sync.
func BenchmarkBuildAndCheck500(b *testing.B) {
	root := b.TempDir()
	for i := range 500 {
		name := fmt.Sprintf("gen-%03d", i)
		p := filepath.Join(root, "policies", name, name+".yaml")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		doc := fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: %s
spec:
  background: false
  validationFailureAction: Audit
  rules:
  - name: require-label
    match:
      any:
      - resources:
          kinds: [Pod]
    validate:
      message: "label bench-%d is required"
      pattern:
        metadata:
          labels:
            bench-%d: "?*"
`, name, i, i)
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	sch := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(sch))
	utilruntime.Must(kyvernov1.AddToScheme(sch))
	utilruntime.Must(kyvernov2.AddToScheme(sch))
	b.ResetTimer()
	for b.Loop() {
		objs, err := build.Build(context.Background(), root, "policies")
		if err != nil {
			b.Fatal(err)
		}
		if len(objs) != 500 {
			b.Fatalf("built %d objects, want 500", len(objs))
		}
		if err := Objects(objs, sch); err != nil {
			b.Fatal(err)
		}
	}
}
