package pattern

import (
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

func loadYAML(tb testing.TB, file string) any {
	tb.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		tb.Fatalf("%s: %v", file, err)
	}
	return v
}

func TestRestrictedPodPasses(t *testing.T) {
	pod := loadYAML(t, "testdata/pod.yaml")
	c, err := Compile(loadYAML(t, "testdata/restricted-pattern.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if e := c.Validate(pod); e != nil {
		t.Fatalf("the restricted Pod fails: %+v", e)
	}
	// Breaking one field of the second container fails at that field.
	envoy := pod.(map[string]any)["spec"].(map[string]any)["containers"].([]any)[1].(map[string]any)
	envoy["securityContext"].(map[string]any)["allowPrivilegeEscalation"] = true
	e := c.Validate(pod)
	if e == nil || e.Kind != Fail || e.Path != "/spec/containers/1/securityContext/allowPrivilegeEscalation/" {
		t.Fatalf("got %+v, want a failure at the envoy container", e)
	}
}

// BenchmarkValidatePod matches a realistic Pod against a compiled
// Pod-Security-like pattern: the engine's hot path.
func BenchmarkValidatePod(b *testing.B) {
	pod := loadYAML(b, "testdata/pod.yaml")
	c, err := Compile(loadYAML(b, "testdata/restricted-pattern.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if e := c.Validate(pod); e != nil {
			b.Fatal(e)
		}
	}
}

// BenchmarkCompileAndValidatePod includes compiling the pattern, as the
// engine must when the pattern holds variables.
func BenchmarkCompileAndValidatePod(b *testing.B) {
	pod := loadYAML(b, "testdata/pod.yaml")
	p := loadYAML(b, "testdata/restricted-pattern.yaml")
	b.ReportAllocs()
	for b.Loop() {
		if e := Validate(pod, p); e != nil {
			b.Fatal(e)
		}
	}
}

// TestConcurrentValidate shares one Compiled between goroutines, as the
// webhook does; run with -race.
func TestConcurrentValidate(t *testing.T) {
	c, err := Compile(loadYAML(t, "testdata/restricted-pattern.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *Error)
	for i := 0; i < 4; i++ {
		pod := loadYAML(t, "testdata/pod.yaml") // one copy per goroutine
		go func() {
			var last *Error
			for j := 0; j < 50; j++ {
				last = c.Validate(pod)
			}
			done <- last
		}()
	}
	for i := 0; i < 4; i++ {
		if e := <-done; e != nil {
			t.Errorf("goroutine result %+v", e)
		}
	}
}
