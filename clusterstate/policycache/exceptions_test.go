package policycache

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

func TestParseExceptionNamespaces(t *testing.T) {
	tests := []struct {
		list            []string
		trusted, others []string
		str, err        string
	}{
		{list: []string{"charter"}, trusted: []string{"charter"}, others: []string{"team-a", ""}, str: "charter"},
		{list: []string{"charter", "platform", "charter"}, trusted: []string{"charter", "platform"}, others: []string{"team-a"}, str: "charter,platform"},
		{list: []string{"*"}, trusted: []string{"charter", "team-a"}, str: "*"},
		{list: []string{"charter", "*"}, trusted: []string{"charter", "team-a"}, str: "*"},
		{list: []string{}, others: []string{"charter"}, str: ""},
		{list: []string{"Team_A"}, err: `namespace "Team_A": a lowercase RFC 1123 label`},
		{list: []string{"charter", " "}, err: "an empty namespace name"},
	}
	for _, tt := range tests {
		ns, err := ParseExceptionNamespaces(tt.list)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want one saying %q", tt.list, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tt.list, err)
		}
		for _, n := range tt.trusted {
			if !ns.Trusts(n) {
				t.Errorf("%q does not trust %q", tt.list, n)
			}
		}
		for _, n := range tt.others {
			if ns.Trusts(n) {
				t.Errorf("%q trusts %q", tt.list, n)
			}
		}
		if ns.String() != tt.str {
			t.Errorf("%q: String %q, want %q", tt.list, ns.String(), tt.str)
		}
	}
	if (ExceptionNamespaces{}).Trusts("charter") {
		t.Error("the zero value trusts a namespace")
	}
}

func exception(ns, name, uid string, generation int64) *kyvernov2.PolicyException {
	return &kyvernov2.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), Generation: generation}}
}

func TestTrustedExceptions(t *testing.T) {
	ns, err := ParseExceptionNamespaces([]string{"charter"})
	if err != nil {
		t.Fatal(err)
	}
	trusted, ignored := trustedExceptions(ns, []*kyvernov2.PolicyException{
		exception("charter", "platform", "u1", 1), exception("team-b", "let-me-in", "u2", 1)})
	if len(trusted) != 1 || trusted[0].Name != "platform" {
		t.Errorf("trusted %v, want charter/platform only", trusted)
	}
	want := `PolicyException team-b/let-me-in is ignored: charter honours PolicyExceptions only from namespace charter (--exception-namespaces=charter), not from "team-b"`
	if len(ignored) != 1 || ignored[0].Reason != want {
		t.Errorf("ignored %+v, want one with reason\n%s", ignored, want)
	}
	none, _ := ParseExceptionNamespaces([]string{})
	if _, ignored := trustedExceptions(none, []*kyvernov2.PolicyException{exception("charter", "x", "u", 1)}); len(ignored) != 1 ||
		!strings.Contains(ignored[0].Reason, "only from no namespace (--exception-namespaces=)") {
		t.Errorf("with no namespace trusted: %+v", ignored)
	}
}

// TestIgnoredOnce: an ignored exception is reported once per generation,
// not on every rebuild, and again once it was trusted (or gone) meanwhile.
func TestIgnoredOnce(t *testing.T) {
	seen := ignoredOnce{}
	ig := func(exs ...*kyvernov2.PolicyException) []IgnoredException {
		out := make([]IgnoredException, len(exs))
		for i, ex := range exs {
			out[i] = IgnoredException{Exception: ex}
		}
		return out
	}
	names := func(l []IgnoredException) string {
		var s []string
		for _, i := range l {
			s = append(s, i.Exception.GetName())
		}
		return strings.Join(s, ",")
	}
	steps := []struct {
		ignored []IgnoredException
		want    string
	}{
		{ig(exception("b", "x", "u1", 1), exception("b", "y", "u2", 1)), "x,y"},
		{ig(exception("b", "x", "u1", 1), exception("b", "y", "u2", 1)), ""},
		{ig(exception("b", "x", "u1", 2), exception("b", "y", "u2", 1)), "x"},
		{ig(exception("b", "x", "u1", 2)), ""},
		{ig(exception("b", "x", "u1", 2), exception("b", "y", "u2", 1)), "y"},
	}
	for i, s := range steps {
		if got := names(seen.fresh(s.ignored)); got != s.want {
			t.Errorf("step %d: reported %q, want %q", i+1, got, s.want)
		}
	}
}
