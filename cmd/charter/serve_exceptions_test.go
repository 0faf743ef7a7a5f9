package main

import (
	"io"
	"strings"
	"testing"
)

// TestExceptionNamespacesFlag: without the flag only charter's namespace
// is trusted; "*" trusts every namespace, as dev runs; a bad name is
// refused before charter connects anywhere, naming the flag.
func TestExceptionNamespacesFlag(t *testing.T) {
	tests := []struct {
		flag             []string
		trusted, ignored []string
	}{
		{flag: nil, trusted: []string{"charter"}, ignored: []string{"team-a"}},
		{flag: []string{"platform", "security"}, trusted: []string{"platform", "security"}, ignored: []string{"charter"}},
		{flag: []string{"*"}, trusted: []string{"charter", "team-a"}},
		{flag: []string{}, ignored: []string{"charter"}},
	}
	for _, tt := range tests {
		ns, err := exceptionNamespaces(serveOptions{namespace: "charter", exceptionNamespaces: tt.flag})
		if err != nil {
			t.Fatalf("%q: %v", tt.flag, err)
		}
		for _, n := range tt.trusted {
			if !ns.Trusts(n) {
				t.Errorf("--exception-namespaces=%q does not trust %s", tt.flag, n)
			}
		}
		for _, n := range tt.ignored {
			if ns.Trusts(n) {
				t.Errorf("--exception-namespaces=%q trusts %s", tt.flag, n)
			}
		}
	}

	root := newRootCommand()
	root.SetArgs([]string{"serve", "--kubeconfig=/nonexistent", "--exception-namespaces=charter,Team_A"})
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), `--exception-namespaces: namespace "Team_A"`) {
		t.Errorf("charter serve --exception-namespaces=charter,Team_A: %v, want an error naming the flag and the name", err)
	}
}
