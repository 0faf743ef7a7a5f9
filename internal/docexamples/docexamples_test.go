package docexamples

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readPage(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "page.md"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestCommands: each simple command of the shell block, with its page
// line, its words as the shell would pass them, and a here-document as
// its stdin; comments, assignments and redirections left out.
func TestCommands(t *testing.T) {
	blocks, err := Blocks("page.md", readPage(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || !blocks[0].IsShell() || blocks[1].Lang != "yaml" || blocks[1].IsShell() {
		t.Fatalf("blocks %+v", blocks)
	}
	got, err := Commands(blocks[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []Command{
		{Line: 6, Args: []string{"make", "run"}},
		{Line: 7, Args: []string{"bin/charter", "test", "policies/", "-t", "policy=a,resource=b-*"}},
		{Line: 8, Args: []string{"kubectl", "apply", "-f", "examples/pods/compliant.yaml"}},
		{Line: 8, Args: []string{"kubectl", "get", "polr", "-A"}},
		{Line: 8, Args: []string{"grep", "demo"}},
		{Line: 9, Args: []string{"bin/charter", "apply", "a.yaml", "--resource", "pod.yaml"}},
		{Line: 11, Args: []string{"kubectl", "apply", "-f", "-"}, Stdin: "apiVersion: v1\nkind: ConfigMap\n"},
		{Line: 15, Args: []string{"bin/charter", "apply", "<policy.yaml>", "--resource", "<dir>/"}},
		{Line: 16, Args: []string{"echo", "its", `a "quoted" word`, ""}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("commands\n got %+v\nwant %+v", got, want)
	}
}

// TestLinksAndAnchors: links outside code, and GitHub's anchors.
func TestLinksAndAnchors(t *testing.T) {
	page := readPage(t)
	links := Links("page.md", page)
	if len(links) != 1 || links[0].Target != "other.md#a-heading" || links[0].Line != 3 {
		t.Errorf("links %+v", links)
	}
	anchors := Anchors(page)
	for _, a := range []string{"a-page", "a-heading-with-code-and-more"} {
		if !anchors[a] {
			t.Errorf("no anchor %q in %v", a, anchors)
		}
	}
}

// TestFaultsNameTheLine: what the parser cannot read is an error naming
// the page and line, never a command silently dropped.
func TestFaultsNameTheLine(t *testing.T) {
	for name, c := range map[string]struct{ page, want string }{
		"unclosed fence":   {"x\n```sh\nmake run\n", "p.md:2: the code block"},
		"unclosed quote":   {"```sh\necho 'a\n```\n", "p.md:2: unclosed '"},
		"unclosed heredoc": {"```sh\ncat <<EOF\na\n```\n", "p.md:2: the here-document <<EOF is never closed"},
	} {
		blocks, err := Blocks("p.md", []byte(c.page))
		if err == nil {
			_, err = Commands(blocks[0])
		}
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one starting %q", name, err, c.want)
		}
	}
}
