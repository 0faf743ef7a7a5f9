package podsecurity

import (
	"os"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"
)

type testCase struct {
	Name     string              `json:"name"`
	Level    string              `json:"level"`
	Version  string              `json:"version"`
	Excludes []Exclude           `json:"excludes"`
	Pod      corev1.Pod          `json:"pod"`
	Fail     []string            `json:"fail"`
	Images   map[string][]string `json:"images"`
}

func loadCases(t testing.TB) []testCase {
	t.Helper()
	data, err := os.ReadFile("testdata/cases.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases []testCase
	if err := yaml.UnmarshalStrict(data, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

func TestEvaluate(t *testing.T) {
	for _, tc := range loadCases(t) {
		t.Run(tc.Name, func(t *testing.T) {
			before := tc.Pod.DeepCopy()
			res, err := Evaluate(tc.Pod.ObjectMeta, &tc.Pod.Spec, tc.Level, tc.Version, tc.Excludes)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range res.Checks {
				got = append(got, c.ID)
				if c.Control == "" || c.Reason == "" {
					t.Errorf("check %s lacks control or reason: %+v", c.ID, c)
				}
				if want, ok := tc.Images[c.ID]; ok && !slices.Equal(want, c.Images) {
					t.Errorf("check %s images = %v, want %v", c.ID, c.Images, want)
				}
			}
			if !slices.Equal(got, tc.Fail) && !(len(got) == 0 && len(tc.Fail) == 0) {
				t.Errorf("failed checks = %v, want %v\n%s", got, tc.Fail, res.Message("r"))
			}
			if res.Allowed() != (len(tc.Fail) == 0) {
				t.Errorf("Allowed() = %v", res.Allowed())
			}
			if !equality.Semantic.DeepEqual(before, &tc.Pod) {
				t.Error("Evaluate modified its input")
			}
		})
	}
}

// TestProfileMatchesEvaluator holds the check selection to the upstream
// evaluator: without exclusions, the failed reasons and details come out
// the same and in the same order, for every level and several versions.
func TestProfileMatchesEvaluator(t *testing.T) {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range loadCases(t) {
		for _, level := range Levels {
			for _, version := range []string{"latest", "v1.0", "v1.22", "v1.25", "v1.30", "v1.35", "v1.99"} {
				lv, err := ParseLevelVersion(level, version)
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				for _, r := range evaluator.EvaluatePod(lv, &tc.Pod.ObjectMeta, &tc.Pod.Spec) {
					if !r.Allowed {
						want = append(want, r.ForbiddenReason+": "+r.ForbiddenDetail)
					}
				}
				res, err := Evaluate(tc.Pod.ObjectMeta, &tc.Pod.Spec, level, version, nil)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, c := range res.Checks {
					got = append(got, c.Reason+": "+c.Detail)
				}
				if !slices.Equal(want, got) {
					t.Errorf("%s at %s:%s:\n evaluator %q\n      ours %q", tc.Name, level, version, want, got)
				}
			}
		}
	}
}

func TestEvaluateErrors(t *testing.T) {
	pod := &corev1.PodSpec{}
	for _, tc := range []struct {
		level, version string
		excludes       []Exclude
	}{
		{"strict", "latest", nil},
		{"baseline", "1.2.3", nil},
		{"baseline", "latest", []Exclude{{ControlName: "Capability"}}},
	} {
		if _, err := Evaluate(corev1.Pod{}.ObjectMeta, pod, tc.level, tc.version, tc.excludes); err == nil {
			t.Errorf("%+v: no error", tc)
		}
	}
}

func TestMessage(t *testing.T) {
	pod := corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}
	res, err := Evaluate(pod.ObjectMeta, &pod.Spec, "baseline", "latest", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `Validation rule 'baseline' failed. It violates PodSecurity "baseline:latest": (Forbidden reason: host namespaces, field error list: [hostNetwork=true])`
	if got := res.Message("baseline"); got != want {
		t.Errorf("message:\n got %s\nwant %s", got, want)
	}
	pod.Spec.HostNetwork = false
	res, _ = Evaluate(pod.ObjectMeta, &pod.Spec, "baseline", "", nil)
	if got := res.Message("baseline"); got != "Validation rule 'baseline' passed." {
		t.Errorf("pass message = %q", got)
	}
}

func BenchmarkEvaluateRestrictedLatest(b *testing.B) {
	var pod corev1.Pod
	for _, tc := range loadCases(b) {
		if tc.Name == "restricted compliant pod passes" {
			pod = tc.Pod
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Evaluate(pod.ObjectMeta, &pod.Spec, "restricted", "latest", nil); err != nil {
			b.Fatal(err)
		}
	}
}
