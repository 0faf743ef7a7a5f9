package workload

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/hack/benchadmission/policymix"
	"github.com/charter-dev/charter/webhook/server"
)

const policyDir = "../../../policies/pod-security"

func TestEnforcedPolicies(t *testing.T) {
	policies, err := policymix.EnforcedPolicies(policyDir)
	if err != nil {
		t.Fatal(err)
	}
	// 11 baseline and 6 restricted policies in charter's library.
	if len(policies) != 17 {
		t.Errorf("read %d policies, want 17", len(policies))
	}
	for _, p := range policies {
		if got, _, _ := unstructured.NestedString(p.Object, "spec", "validationFailureAction"); got != "Enforce" {
			t.Errorf("%s: validationFailureAction %q, want Enforce", p.GetName(), got)
		}
		rules, _, _ := unstructured.NestedSlice(p.Object, "spec", "rules")
		for _, r := range rules {
			if _, found, _ := unstructured.NestedFieldNoCopy(r.(map[string]any), "validate", "failureAction"); found {
				t.Errorf("%s: a rule keeps its own failureAction, which would win over Enforce", p.GetName())
			}
		}
	}
}

func TestEnforcedPoliciesEmptyFolder(t *testing.T) {
	_, err := policymix.EnforcedPolicies(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no ClusterPolicy found") {
		t.Fatalf("err = %v, want one saying no policy was found", err)
	}
}

// TestPodsGetTheirDecision sends every Pod through charter's real
// admission handler on /validate/fail with the policies in Enforce: the
// benchmark counts any other decision as an error, so the table must be
// right.
func TestPodsGetTheirDecision(t *testing.T) {
	policies, err := policymix.EnforcedPolicies(policyDir)
	if err != nil {
		t.Fatal(err)
	}
	typed, err := policymix.Typed(policies)
	if err != nil {
		t.Fatal(err)
	}
	snapshot, err := Snapshot(typed)
	if err != nil {
		t.Fatal(err)
	}
	h := server.NewHandler(server.Options{Policies: Fixed{snapshot}})
	pods := Pods("bench")
	var compliant, noncompliant int
	for _, p := range pods {
		t.Run(p.Pod.Name, func(t *testing.T) {
			allowed, msg := decide(t, h, p)
			if allowed != p.Compliant {
				t.Fatalf("allowed = %v, want %v; %s", allowed, p.Compliant, msg)
			}
			if !p.Compliant && !strings.Contains(msg, "\n"+p.Violates+":\n") {
				t.Errorf("denial does not name %s:\n%s", p.Violates, msg)
			}
		})
		if p.Compliant {
			compliant++
		} else {
			noncompliant++
		}
	}
	if compliant < 2 || noncompliant < 10 {
		t.Errorf("%d compliant and %d non-compliant Pods: too few shapes to be a fair mix", compliant, noncompliant)
	}
}

// decide sends Pod p through the admission handler h on /validate/fail
// and returns its decision and message.
func decide(t *testing.T, h http.Handler, p Pod) (allowed bool, message string) {
	t.Helper()
	body, err := Review(p.Pod, "uid-"+p.Pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, server.PathValidateFail, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", w.Code, w.Body)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil || review.Response == nil {
		t.Fatalf("response %s: %v", w.Body, err)
	}
	if got := string(review.Response.UID); got != "uid-"+p.Pod.Name {
		t.Errorf("response uid %q", got)
	}
	if review.Response.Result != nil {
		message = review.Response.Result.Message
	}
	return review.Response.Allowed, message
}

// TestPodSecurityPairs reads the corpus's Pod Security set in both forms
// and wants the same policies, ValidatingPolicies in Deny and
// ClusterPolicies in Enforce, each set giving every benchmark Pod its
// decision: the vpol mode compares the two on the same requests.
func TestPodSecurityPairs(t *testing.T) {
	corpus := "../../../../shared/conformance/kyverno-policies"
	if _, err := os.Stat(corpus); err != nil {
		t.Skipf("conformance corpus not present: %v", err)
	}
	cpols, vpols, err := PodSecurityPairs(filepath.Join(corpus, "pod-security"), filepath.Join(corpus, "pod-security-vpol"))
	if err != nil {
		t.Fatal(err)
	}
	// 10 baseline and 6 restricted policies have a translation; the
	// corpus's disallow-host-ports-range and restrict-apparmor-profiles
	// have none.
	if len(vpols) != 16 || len(cpols) != len(vpols) {
		t.Fatalf("%d ValidatingPolicies and %d ClusterPolicies, want 16 of each", len(vpols), len(cpols))
	}
	for i := range vpols {
		vp, cp := vpols[i].(*policiesv1.ValidatingPolicy), cpols[i].(*kyvernov1.ClusterPolicy)
		if vp.Name != cp.Name {
			t.Errorf("pair %d: ValidatingPolicy %s, ClusterPolicy %s", i, vp.Name, cp.Name)
		}
		if got := vp.Spec.ValidationAction; len(got) != 1 || got[0] != admissionregistrationv1.Deny {
			t.Errorf("%s: validationActions %v, want [Deny]", vp.Name, got)
		}
		if cp.Spec.ValidationFailureAction != kyvernov1.Enforce {
			t.Errorf("%s: validationFailureAction %q, want Enforce", cp.Name, cp.Spec.ValidationFailureAction)
		}
	}
	for _, set := range []struct {
		name     string
		policies []kyvernov1.PolicyInterface
	}{{"ClusterPolicies", cpols}, {"ValidatingPolicies", vpols}} {
		snapshot, err := Snapshot(set.policies)
		if err != nil {
			t.Fatalf("%s: %v", set.name, err)
		}
		h := server.NewHandler(server.Options{Policies: Fixed{snapshot}})
		for _, p := range Pods("bench") {
			if allowed, msg := decide(t, h, p); allowed != p.Compliant {
				t.Errorf("%s, Pod %s: allowed = %v, want %v; %s", set.name, p.Pod.Name, allowed, p.Compliant, msg)
			}
		}
	}
}

func TestMix(t *testing.T) {
	pods := Pods("bench")
	tests := []struct {
		share float64
		n     int
		want  int // non-compliant among the first n
	}{
		{0, 100, 0},
		{1, 100, 100},
		{0.5, 100, 50},
		{0.25, 1000, 250},
		{0.3, 10, 3},
		{0.5, 1, 0},
	}
	for _, tt := range tests {
		m, err := NewMix(pods, tt.share)
		if err != nil {
			t.Fatal(err)
		}
		got, run, longest := 0, 0, 0
		for i := range tt.n {
			if !m.At(i).Compliant {
				got++
				run++
				longest = max(longest, run)
			} else {
				run = 0
			}
		}
		if got != tt.want {
			t.Errorf("share %v: %d non-compliant of %d, want %d", tt.share, got, tt.n, tt.want)
		}
		if tt.share > 0 && tt.share <= 0.5 && longest > 1 {
			t.Errorf("share %v: %d non-compliant in a row, want them spread out", tt.share, longest)
		}
	}
}

func TestMixCyclesThroughEveryPod(t *testing.T) {
	pods := Pods("bench")
	m, err := NewMix(pods, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := range 4 * len(pods) {
		seen[m.At(i).Pod.Name] = true
	}
	if len(seen) != len(pods) {
		t.Errorf("%d of %d Pods sent", len(seen), len(pods))
	}
}

func TestNewMixRefusesBadShares(t *testing.T) {
	pods := Pods("bench")
	for _, share := range []float64{-0.1, 1.5} {
		if _, err := NewMix(pods, share); err == nil {
			t.Errorf("share %v accepted", share)
		}
	}
	onlyCompliant := pods[:1]
	if _, err := NewMix(onlyCompliant, 0.5); err == nil {
		t.Error("a non-compliant share with no non-compliant Pod accepted")
	}
}
