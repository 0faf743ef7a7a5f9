package anchor

import "testing"

func TestParse(t *testing.T) {
	cases := []struct {
		key    string
		ok     bool
		kind   Kind
		inner  string
		backTo string
	}{
		{"(image)", true, Condition, "image", "(image)"},
		{"<(image)", true, Global, "image", "<(image)"},
		{"=(hostNetwork)", true, Equality, "hostNetwork", "=(hostNetwork)"},
		{"^(containers)", true, Existence, "containers", "^(containers)"},
		{"X(hostPath)", true, Negation, "hostPath", "X(hostPath)"},
		{"+(imagePullPolicy)", true, Add, "imagePullPolicy", "+(imagePullPolicy)"},
		{"  (image)  ", true, Condition, "image", "(image)"},
		{"=(app.kubernetes.io/*)", true, Equality, "app.kubernetes.io/*", "=(app.kubernetes.io/*)"},
		{"(a)(b)", true, Condition, "a)(b", "(a)(b)"},
		{"( x )", true, Condition, " x ", "( x )"},
		{"image", false, None, "", ""},
		{"()", false, None, "", ""},
		{"=()", false, None, "", ""},
		{"~(x)", false, None, "", ""},
		{"x(y)", false, None, "", ""},
		{"(x", false, None, "", ""},
		{"=x)", false, None, "", ""},
		{"", false, None, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			a, ok := Parse(tc.key)
			if ok != tc.ok || a.Kind != tc.kind || a.Key != tc.inner {
				t.Fatalf("Parse(%q) = %+v, %v; want {%v %q}, %v", tc.key, a, ok, tc.kind, tc.inner, tc.ok)
			}
			if ok && a.String() != tc.backTo {
				t.Errorf("String() = %q, want %q", a.String(), tc.backTo)
			}
			if KindOf(tc.key) != tc.kind {
				t.Errorf("KindOf(%q) = %v", tc.key, KindOf(tc.key))
			}
		})
	}
}

func TestPredicates(t *testing.T) {
	if !IsCondition("(a)") || !IsGlobal("<(a)") || !IsEquality("=(a)") || !IsExistence("^(a)") ||
		!IsNegation("X(a)") || !IsAdd("+(a)") {
		t.Fatal("a predicate rejected its own anchor")
	}
	if IsCondition("=(a)") || IsAdd("(a)") || IsNegation("x(a)") {
		t.Fatal("a predicate accepted another anchor")
	}
	if Strip("+(a)") != "a" || Strip("plain") != "plain" {
		t.Fatal("Strip")
	}
	if Build(None, "k") != "k" || Build(Global, "k") != "<(k)" {
		t.Fatal("Build")
	}
}

func TestMalformed(t *testing.T) {
	bad := []string{"~(x)", "()", "=()", "!(x)", "x(y)", "é(y)", "f(x)"}
	for _, k := range bad {
		if Malformed(k) == nil {
			t.Errorf("Malformed(%q) = nil, want an error", k)
		}
	}
	good := []string{"(x)", "=(x)", "plain", "abc(def)", "x)", "(x"}
	for _, k := range good {
		if err := Malformed(k); err != nil {
			t.Errorf("Malformed(%q) = %v, want nil", k, err)
		}
	}
	if got := Malformed("~(x)").Error(); got != `unknown anchor "~(x)"` {
		t.Errorf("message: %s", got)
	}
}
