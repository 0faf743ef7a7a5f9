package promotion

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
)

// gateCase is one testdata/*.yaml file: the reports of a namespace, the
// staged policies, and the denial expected ("" admits).
type gateCase struct {
	Namespace string                  `json:"namespace"`
	Staged    []Policy                `json:"staged"`
	Reports   []v1alpha2.PolicyReport `json:"reports"`
	Denial    string                  `json:"denial"`
}

// listed serves fixed reports and counts calls.
type listed struct {
	reports []v1alpha2.PolicyReport
	err     error
	calls   int
}

func (l *listed) PolicyReports(context.Context, string) ([]v1alpha2.PolicyReport, error) {
	l.calls++
	return l.reports, l.err
}

func TestGateTestdata(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var tc gateCase
			if err := yaml.UnmarshalStrict(data, &tc); err != nil {
				t.Fatal(err)
			}
			g := &Gate{Reports: &listed{reports: tc.Reports}}
			got, err := g.Check(context.Background(), tc.Namespace, tc.Staged)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.Denial {
				t.Errorf("denial\n got %q\nwant %q", got, tc.Denial)
			}
		})
	}
}

// TestMessageCapsTheList: a namespace with many failures is named by its
// first results and a count of the rest.
func TestMessageCapsTheList(t *testing.T) {
	var results []v1alpha2.PolicyReportResult
	var reports []v1alpha2.PolicyReport
	for i := range 13 {
		name := fmt.Sprintf("web-%02d", i)
		reports = append(reports, v1alpha2.PolicyReport{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
			Scope:      &corev1.ObjectReference{Kind: "Pod", Name: name},
			Results:    append(results, v1alpha2.PolicyReportResult{Policy: "p", Rule: "r", Result: v1alpha2.StatusFail}),
		})
	}
	staged := []Policy{{Key: "p", FailClosed: true}}
	for _, tc := range []struct {
		max        int
		last, tail string
	}{
		{max: 0, last: "Pod/web-09 (p/r: fail)", tail: " and 3 more;"},
		{max: 3, last: "Pod/web-02 (p/r: fail)", tail: " and 10 more;"},
		{max: 13, last: "Pod/web-12 (p/r: fail)", tail: ";"},
	} {
		t.Run(fmt.Sprint(tc.max), func(t *testing.T) {
			got, err := (&Gate{Reports: &listed{reports: reports}, MaxListed: tc.max}).Check(context.Background(), "shop", staged)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got, ": 13 results of staged policies fail there") {
				t.Errorf("denial does not count 13 results: %q", got)
			}
			if !strings.Contains(got, tc.last+tc.tail) {
				t.Errorf("denial does not end its list with %q: %q", tc.last+tc.tail, got)
			}
			want := tc.max
			if want == 0 {
				want = DefaultMaxListed
			}
			if n := strings.Count(got, "(p/r: fail)"); n != want {
				t.Errorf("denial names %d results, want %d: %q", n, want, got)
			}
		})
	}
}

func TestGateWithoutStagedPoliciesReadsNothing(t *testing.T) {
	l := &listed{err: errors.New("must not be called")}
	got, err := (&Gate{Reports: l}).Check(context.Background(), "shop", nil)
	if got != "" || err != nil || l.calls != 0 {
		t.Errorf("Check = %q, %v after %d list calls; want an admission without reading reports", got, err, l.calls)
	}
}

func TestGateListErrorNamesNamespace(t *testing.T) {
	l := &listed{err: errors.New(`policyreports.wgpolicyk8s.io is forbidden`)}
	_, err := (&Gate{Reports: l}).Check(context.Background(), "shop", []Policy{{Key: "p"}})
	if err == nil || !strings.Contains(err.Error(), `namespace "shop"`) || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("error %v, want one naming the namespace and the cause", err)
	}
}
