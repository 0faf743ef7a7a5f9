package reliability

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// CorpusDir is the folder of the bad input corpus (issue #31 part 4),
// found from this file so that tests of any package read the one corpus.
func CorpusDir(parts ...string) string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(self), "testdata", "badinput"}, parts...)...)
}

// BadPolicy is one file of testdata/badinput/policies: a policy that
// every way into charter (policy admission, the GitOps check, a Git
// revision, the CLI) must refuse, naming Field.
type BadPolicy struct {
	// File is the file's name.
	File string `json:"-"`
	// Field is the path inside the policy the refusal must name.
	Field string `json:"field"`
	// Policy is the object.
	Policy map[string]any `json:"policy"`
}

// Kind is the policy's kind.
func (p BadPolicy) Kind() string {
	kind, _ := p.Policy["kind"].(string)
	return kind
}

// Name is "namespace/name" or "name", as refusals quote it.
func (p BadPolicy) Name() string {
	meta, _ := p.Policy["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if ns, _ := meta["namespace"].(string); ns != "" {
		return ns + "/" + name
	}
	return name
}

// YAML is the policy alone, as a repository or a CLI user writes it.
func (p BadPolicy) YAML(t testing.TB) []byte {
	t.Helper()
	data, err := yaml.Marshal(p.Policy)
	if err != nil {
		t.Fatalf("%s: %v", p.File, err)
	}
	return data
}

// BadPolicies reads every file of testdata/badinput/policies; it fails t
// when there are none or one lacks its field.
func BadPolicies(t testing.TB) []BadPolicy {
	t.Helper()
	files := corpusFiles(t, "policies")
	out := make([]BadPolicy, 0, len(files))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		p := BadPolicy{File: filepath.Base(file)}
		if err := yaml.UnmarshalStrict(data, &p); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if p.Field == "" || p.Kind() == "" || p.Name() == "" {
			t.Fatalf("%s: a bad policy needs field, and a policy with kind and metadata.name", file)
		}
		out = append(out, p)
	}
	return out
}

// Input is one file of a corpus folder whose want.yaml says, file by
// file, what the refusal of it must contain.
type Input struct {
	// File is the file's name; Data its content.
	File string
	Data []byte
	// Want are the texts the error must hold: what is wrong and where.
	Want []string
}

// Inputs reads testdata/badinput/<dir>: every file but want.yaml, with
// its entry in want.yaml. A file without an entry, or an entry without a
// file, fails t: every input states what its error must say.
func Inputs(t testing.TB, dir string) []Input {
	t.Helper()
	wantFile := CorpusDir(dir, "want.yaml")
	data, err := os.ReadFile(wantFile)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string][]string
	if err := yaml.UnmarshalStrict(data, &want); err != nil {
		t.Fatalf("%s: %v", wantFile, err)
	}
	var out []Input
	for _, file := range corpusFiles(t, dir) {
		name := filepath.Base(file)
		if name == "want.yaml" {
			continue
		}
		w, ok := want[name]
		if !ok || len(w) == 0 {
			t.Fatalf("%s: no entry for %s: say what its error must contain", wantFile, name)
		}
		delete(want, name)
		content, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Input{File: name, Data: content, Want: w})
	}
	for name := range want {
		t.Fatalf("%s: entry %s names no file", wantFile, name)
	}
	return out
}

// corpusFiles lists the files of a corpus folder, sorted.
func corpusFiles(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(CorpusDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() {
			files = append(files, CorpusDir(dir, e.Name()))
		}
	}
	if len(files) == 0 {
		t.Fatalf("no files in %s", CorpusDir(dir))
	}
	sort.Strings(files)
	return files
}

// Tally counts what a part fed charter and how it answered: each input
// must get an error holding every text it wants, and change nothing.
type Tally struct {
	inputs  int
	unclear []string
	changes []string
}

// Refused records input's answer: err is the error it got, nil when it
// was accepted (which is itself a fault).
func (t *Tally) Refused(input string, err error, want ...string) {
	t.inputs++
	if err == nil {
		t.unclear = append(t.unclear, input+": accepted")
		return
	}
	var missing []string
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			missing = append(missing, fmt.Sprintf("%q", w))
		}
	}
	if len(missing) > 0 {
		t.unclear = append(t.unclear, fmt.Sprintf("%s: error %q lacks %s", input, err, strings.Join(missing, ", ")))
	}
}

// Changed records what changed although nothing should have.
func (t *Tally) Changed(what ...string) { t.changes = append(t.changes, what...) }

// Report reports the tally as part's figure, "N inputs, N clear errors, 0
// changes", and logs each fault so a missed target says which input.
func (t *Tally) Report(tb testing.TB, part string) {
	tb.Helper()
	for _, u := range t.unclear {
		tb.Log("unclear: " + u)
	}
	for _, c := range t.changes {
		tb.Log("changed: " + c)
	}
	Report(tb, Figure{
		Part:   part,
		Figure: fmt.Sprintf("%d inputs, %d clear errors, %d changes", t.inputs, t.inputs-len(t.unclear), len(t.changes)),
		Target: "every error clear, 0 changes",
		OK:     t.inputs > 0 && len(t.unclear) == 0 && len(t.changes) == 0,
	})
}

// BadFiles is one file of testdata/badinput/revisions or
// testdata/badinput/cli: files that charter must refuse, its error holding
// every text of Want. A revision is a good one plus Files; a CLI run
// writes Files to a folder and runs charter with Args, "{dir}" standing
// for that folder.
type BadFiles struct {
	// File is the corpus file's name.
	File string `json:"-"`
	// Args are charter's arguments (CLI runs only).
	Args []string `json:"args"`
	// Want are the texts the refusal must hold: the file and what is
	// wrong in it.
	Want []string `json:"want"`
	// Files are the files (path → content) to write.
	Files map[string]string `json:"files"`
}

// BadRevisions reads every file of testdata/badinput/revisions.
func BadRevisions(t testing.TB) []BadFiles { return badFiles(t, "revisions", false) }

// BadCLIRuns reads every file of testdata/badinput/cli.
func BadCLIRuns(t testing.TB) []BadFiles { return badFiles(t, "cli", true) }

func badFiles(t testing.TB, dir string, withArgs bool) []BadFiles {
	t.Helper()
	var out []BadFiles
	for _, file := range corpusFiles(t, dir) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		r := BadFiles{File: filepath.Base(file)}
		if err := yaml.UnmarshalStrict(data, &r); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(r.Want) == 0 || len(r.Files) == 0 || withArgs != (len(r.Args) > 0) {
			t.Fatalf("%s: needs want and files, and args for a CLI run only", file)
		}
		out = append(out, r)
	}
	return out
}
