// Command reliability is `make test-reliability` (issue #31): it runs every
// fuzz target of the repository with Go's native fuzzer for a fixed time,
// the seed corpora of all of them as regression tests, and the tests that
// measure charter under bad input, faults and overload, and prints one
// table: part, figure, target, ok. It exits non-zero when a target is
// missed.
//
//	go run ./hack/reliability [-mode full|short] [-fuzztime 30s] [-parts regexp]
//
// The full mode fuzzes each target for -fuzztime (minutes in all) and runs
// every part. The short mode, which .ci/run runs, is about a minute of
// tests on a quiet machine, builds aside: the seed corpora, 5 s of fuzzing
// of the quickest target, the admission bad input and charter absent with
// failurePolicy Fail, the CLI's bad input, a kill mid-generate and
// mid-cleanup and a kube-apiserver restart under load.
//
// -parts runs only the parts whose names match, of the mode's, and no
// fuzzing: `make test-reliability RELIABILITY_PARTS=soak SOAK=10` is the two
// soaks alone.
//
// Fuzzing runs one worker (-parallel 1): the machine is shared, and a
// fuzzer takes every core it is given. A crash leaves its input in the
// package's testdata/fuzz/<target>/, where it stays as a regression test
// once the bug is fixed.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/charter-dev/charter/internal/reliability"
)

func main() {
	mode := flag.String("mode", "full", "full, or short (about a minute of tests, for CI)")
	fuzztime := flag.Duration("fuzztime", 30*time.Second, "how long each fuzz target runs in the full mode")
	only := flag.String("parts", "", "run only the parts whose names match this regular expression, and no fuzzing")
	flag.Parse()
	var p plan
	switch *mode {
	case "full":
		p = fullPlan(*fuzztime)
	case "short":
		p = shortPlan()
	default:
		fmt.Fprintf(os.Stderr, "reliability: -mode %q: want full or short\n", *mode)
		os.Exit(2)
	}
	if *only != "" {
		var err error
		if p, err = p.only(*only); err != nil {
			fmt.Fprintf(os.Stderr, "reliability: -parts: %v\n", err)
			os.Exit(2)
		}
	}
	runMode = *mode
	start := time.Now()
	var rows []reliability.Figure
	if p.seeds {
		rows = append(rows, runSeeds(fuzzTargets)...)
	}
	for _, ft := range p.fuzz {
		rows = append(rows, runFuzz(ft, p.fuzztime))
	}
	for _, part := range p.parts {
		rows = append(rows, runPart(part)...)
	}
	failed := printTable(os.Stdout, rows)
	// The tests' own time, apart from building them: what the short
	// mode's minute is counted in.
	fmt.Printf("\n%s mode, %s, of which tests %s\n", *mode, time.Since(start).Round(time.Second), testTime.Round(time.Second))
	if failed > 0 {
		fmt.Printf("%d of %d targets missed\n", failed, len(rows))
		os.Exit(1)
	}
}

// plan is what a mode runs.
type plan struct {
	seeds    bool
	fuzz     []fuzzTarget
	fuzztime time.Duration
	parts    []part
}

func fullPlan(fuzztime time.Duration) plan {
	return plan{seeds: true, fuzz: fuzzTargets, fuzztime: fuzztime, parts: parts}
}

// only keeps the parts of p whose names match expr, without the seeds
// and the fuzzing; a pattern that matches none is an error naming them.
func (p plan) only(expr string) (plan, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return plan{}, err
	}
	var kept []part
	var names []string
	for _, pt := range p.parts {
		names = append(names, strconv.Quote(pt.name))
		if re.MatchString(pt.name) {
			kept = append(kept, pt)
		}
	}
	if len(kept) == 0 {
		return plan{}, fmt.Errorf("%q matches none of this mode's parts: %s", expr, strings.Join(names, ", "))
	}
	return plan{parts: kept}, nil
}

// shortPlan fuzzes the target marked quick for a few seconds and runs the
// parts marked short.
func shortPlan() plan {
	p := plan{seeds: true, fuzztime: 5 * time.Second}
	for _, ft := range fuzzTargets {
		if ft.quick {
			p.fuzz = append(p.fuzz, ft)
		}
	}
	for _, pt := range parts {
		if pt.short {
			p.parts = append(p.parts, pt)
		}
	}
	return p
}

// runSeeds runs every fuzz target's seeds (f.Add and testdata/fuzz) as
// plain tests, package by package: a crash once found stays fixed.
func runSeeds(targets []fuzzTarget) []reliability.Figure {
	byPkg := map[string][]string{}
	var pkgs []string
	for _, ft := range targets {
		if _, ok := byPkg[ft.pkg]; !ok {
			pkgs = append(pkgs, ft.pkg)
		}
		byPkg[ft.pkg] = append(byPkg[ft.pkg], ft.name)
	}
	passed, failed := 0, 0
	var failures []string
	for _, pkg := range pkgs {
		res := goTestJSON(pkg, "^("+strings.Join(byPkg[pkg], "|")+")$", "30m")
		for _, ev := range res.events {
			if !strings.HasPrefix(ev.Test, "Fuzz") || !strings.Contains(ev.Test, "/") {
				continue
			}
			switch ev.Action {
			case "pass":
				passed++
			case "fail":
				failed++
				failures = append(failures, pkg+" "+ev.Test)
			}
		}
		if res.err != nil && failed == 0 {
			// No seed failed, yet go test did: the build, or a test
			// binary that did not finish. Its last words say which.
			failed++
			failures = append(failures, pkg+": "+res.err.Error()+": "+res.lastOutput(5))
		}
	}
	fig := fmt.Sprintf("%d seeds of %d targets pass", passed, len(targets))
	if failed > 0 {
		fig = fmt.Sprintf("%d of %d seeds fail: %s", failed, passed+failed, strings.Join(failures, ", "))
	}
	return []reliability.Figure{{Part: "fuzz: seed corpora (regressions)", Figure: fig, Target: "all pass", OK: failed == 0}}
}

var (
	execsLine   = regexp.MustCompile(`execs: (\d+) \((\d+)/sec\)`)
	failingFile = regexp.MustCompile(`Failing input written to (\S+)`)
)

// runFuzz fuzzes one target for d: the figure is the executions and the
// crashes (0 or 1: the fuzzer stops at the first).
func runFuzz(ft fuzzTarget, d time.Duration) reliability.Figure {
	part := "fuzz: " + ft.name + " (" + strings.TrimPrefix(ft.pkg, "./") + ")"
	out, err := goCommand("test", "-run", "^$", "-fuzz", "^"+ft.name+"$", "-fuzztime", d.String(),
		"-parallel", "1", "-timeout", (d + 30*time.Minute).String(), ft.pkg).CombinedOutput()
	testTime += d
	execs := "0"
	if m := execsLine.FindAllSubmatch(out, -1); len(m) > 0 {
		execs = string(m[len(m)-1][1])
	}
	n, _ := strconv.Atoi(execs)
	fig := fuzzFigure(n, d, 0)
	if err != nil {
		where := lastLines(out, 5)
		if m := failingFile.FindSubmatch(out); m != nil {
			where = "input in " + strings.TrimPrefix(ft.pkg, "./") + "/" + string(m[1])
		}
		fig = fuzzFigure(n, d, 1) + ": " + where
	}
	return reliability.Figure{Part: part, Figure: fig, Target: "0 crashes", OK: err == nil}
}

// fuzzFigure says how much a fuzz run did and found.
func fuzzFigure(execs int, d time.Duration, crashes int) string {
	return fmt.Sprintf("%s execs in %s, %d crashes", thousands(execs), d, crashes)
}

// runPart runs one part's tests and returns the figures they reported;
// a test that failed without one is a row of its own.
func runPart(p part) []reliability.Figure {
	res := goTestJSON(p.pkg, p.run, p.timeout)
	var rows []reliability.Figure
	failedTests := map[string]bool{}
	for _, ev := range res.events {
		if f, ok := reliability.Parse(ev.Output); ok {
			rows = append(rows, f)
		}
		if ev.Action == "fail" && ev.Test != "" && !strings.Contains(ev.Test, "/") {
			failedTests[ev.Test] = true
		}
	}
	for _, r := range rows {
		if !r.OK {
			// The figure says why; the test's failure is the same.
			return rows
		}
	}
	if res.err != nil || len(rows) == 0 {
		fig := "no figure reported"
		if res.err != nil {
			fig = fmt.Sprintf("go test failed (%v): %s", res.err, strings.Join(keys(failedTests), ", "))
			if len(failedTests) == 0 {
				fig += ": " + res.lastOutput(5)
			}
		}
		rows = append(rows, reliability.Figure{Part: p.name, Figure: fig, Target: p.target, OK: false})
	}
	return rows
}

// testEvent is one line of go test -json.
type testEvent struct {
	Action  string
	Test    string
	Output  string
	Elapsed float64 // seconds, on a test's or a package's pass or fail
}

// testTime adds up the time the test binaries ran (a package's elapsed
// time) and fuzzed, builds aside.
var testTime time.Duration

type testResult struct {
	events []testEvent
	stderr []byte
	err    error
}

// lastOutput is the last n lines go test printed: its standard error
// (a build failure), else the tests' output.
func (r testResult) lastOutput(n int) string {
	if len(bytes.TrimSpace(r.stderr)) > 0 {
		return lastLines(r.stderr, n)
	}
	var out bytes.Buffer
	for _, ev := range r.events {
		if ev.Action == "output" {
			out.WriteString(ev.Output)
		}
	}
	return lastLines(out.Bytes(), n)
}

// goTestJSON runs go test -json -count=1 -run run in pkg.
func goTestJSON(pkg, run, timeout string) testResult {
	cmd := goCommand("test", "-json", "-count=1", "-run", run, "-timeout", timeout, pkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return testResult{err: err}
	}
	if err := cmd.Start(); err != nil {
		return testResult{err: err}
	}
	var res testResult
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var ev testEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			res.events = append(res.events, ev)
			if ev.Test == "" && (ev.Action == "pass" || ev.Action == "fail") {
				testTime += time.Duration(ev.Elapsed * float64(time.Second))
			}
			if ev.Action == "output" && os.Getenv("RELIABILITY_VERBOSE") != "" {
				fmt.Fprint(os.Stderr, ev.Output)
			}
		}
	}
	res.err = cmd.Wait()
	res.stderr = stderr.Bytes()
	return res
}

// runMode is the mode the tests are told (reliability.ModeEnv).
var runMode = "full"

// goCommand is the go tool, run from the repository root (make runs this
// from there; go run keeps the working directory).
func goCommand(args ...string) *exec.Cmd {
	goTool := os.Getenv("GO")
	if goTool == "" {
		goTool = "go"
	}
	cmd := exec.Command(goTool, args...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=true", reliability.MeasureEnv+"=1", reliability.ModeEnv+"="+runMode)
	return cmd
}

// printTable writes the rows and returns how many missed their target.
func printTable(w io.Writer, rows []reliability.Figure) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PART\tFIGURE\tTARGET\tOK")
	failed := 0
	for _, r := range rows {
		ok := "ok"
		if !r.OK {
			ok, failed = "MISSED", failed+1
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Part, r.Figure, r.Target, ok)
	}
	tw.Flush()
	return failed
}

func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
