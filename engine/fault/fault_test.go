package fault

import "testing"

func TestListNamesEveryFaultAndSelectsByObject(t *testing.T) {
	faults := List{
		{Kind: "ClusterPolicy", Name: "x", Field: "spec.rules[2].validate.pattern", Fault: `unknown anchor "~(x)"`},
		{Kind: "ClusterPolicy", Name: "y", Fault: "duplicate policy"},
		{Kind: "Policy", Name: "team/x", Field: "spec.rules[0]", Fault: "no handler"},
	}
	want := "ClusterPolicy \"x\": spec.rules[2].validate.pattern: unknown anchor \"~(x)\"\n" +
		"ClusterPolicy \"y\": duplicate policy\n" +
		"Policy \"team/x\": spec.rules[0]: no handler"
	if got := faults.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		kind, name string
		want       int
	}{
		{"ClusterPolicy", "x", 1},
		{"Policy", "x", 0},
		{"Policy", "team/x", 1},
		{"ValidatingPolicy", "y", 0},
	} {
		if got := faults.For(tc.kind, tc.name); len(got) != tc.want {
			t.Errorf("For(%s, %s) = %v, want %d faults", tc.kind, tc.name, got, tc.want)
		}
	}
}

func TestParseNamesEachField(t *testing.T) {
	got := Parse("GlobalContextEntry", "e", []string{"spec.apiCall: one of urlPath or service is required", "no field here"})
	want := "GlobalContextEntry \"e\": spec.apiCall: one of urlPath or service is required\n" +
		"GlobalContextEntry \"e\": no field here"
	if len(got) != 2 || got[0].Field != "spec.apiCall" || got.Error() != want {
		t.Errorf("Parse = %q", got.Error())
	}
	if Parse("k", "n", nil) != nil {
		t.Error("no faults make a nil List")
	}
}
