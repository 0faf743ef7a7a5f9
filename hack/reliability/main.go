// Command reliability is `make test-reliability` (issue #31): it runs every
// fuzz target of the repository with Go's native fuzzer for a fixed time,
// the seed corpora of all of them as regression tests, and the tests that
// measure charter under bad input, faults and overload, and prints one
// table: part, figure, target, ok. It exits non-zero when a target is
// missed.
//
//	go run ./hack/reliability [-mode full|short] [-fuzztime 30s] [-parts regexp]
//
// Both modes first build every test binary they run, once (go test -c),
// and the fuzzer's instrumented build, then run the tests; the table's
// last row is the tests' wall time, builds aside, with the machine's load.
// The full mode fuzzes each target for -fuzztime (minutes in all) and runs
// every part, one at a time. The short mode, which .ci/run runs, is a
// minute of tests on a quiet machine: the seed corpora, 5 s of fuzzing of
// the quickest target, the admission bad input and charter absent with
// failurePolicy Fail, the CLI's bad input, a kill mid-generate and
// mid-cleanup and a kube-apiserver restart under load, all at once, each
// test in a process and on a control plane of its own.
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
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/charter-dev/charter/internal/reliability"
)

func main() {
	mode := flag.String("mode", "full", "full, or short (a minute of tests on a quiet machine, for CI)")
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
	rows, tt := p.run()
	rows = append(rows, wallTimeRow(*mode, p.parallel, tt, time.Since(start)-tt.wall))
	failed := printTable(os.Stdout, rows)
	fmt.Printf("\n%s mode, %s in all, of which tests %s (wall time; builds before them); each job: %s\n",
		*mode, time.Since(start).Round(time.Second), tt.wall.Round(time.Second), strings.Join(tt.jobs, ", "))
	if failed > 0 {
		fmt.Printf("%d of %d targets missed\n", failed, len(rows))
		os.Exit(1)
	}
}

// wallTimeRow is the table's row of how long the mode's tests took, wall
// time, builds aside, with their CPU time and the machine's load as they
// began and ended: a printed figure, never a verdict (the tests' own
// targets are outcomes; a time depends on what else the machine runs).
func wallTimeRow(mode string, parallel bool, tt testTime, builds time.Duration) reliability.Figure {
	how := "one at a time"
	if parallel {
		how = "at once"
	}
	fig := fmt.Sprintf("%s of tests, run %s, using %s of CPU (builds before them %s)", tt.wall.Round(time.Second), how, tt.cpu.Round(time.Second), builds.Round(time.Second))
	if tt.loadBefore != "" && tt.loadAfter != "" {
		fig += fmt.Sprintf("; load %s as they began, %s as they ended", tt.loadBefore, tt.loadAfter)
	}
	target := "printed, not asserted"
	if mode == "short" {
		target = "about 60 s on a quiet machine; printed, not asserted"
	}
	return reliability.Figure{Part: mode + " mode: wall time", Figure: fig, Target: target, OK: true}
}

// loadAverage is the machine's load over the last minute, "" where
// /proc/loadavg cannot be read.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// plan is what a mode runs.
type plan struct {
	seeds    bool
	fuzz     []fuzzTarget
	fuzztime time.Duration
	parts    []part
	// parallel runs the seeds, the fuzzing and each test of the parts at
	// once, each test in a process (and on a control plane) of its own:
	// the short mode's minute. The full mode measures one thing at a
	// time, so that one part's load is not another's figure.
	parallel bool
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
	return plan{parts: kept, parallel: p.parallel}, nil
}

// shortPlan fuzzes the target marked quick for a few seconds and runs the
// parts marked short, all at once.
func shortPlan() plan {
	p := plan{seeds: true, fuzztime: 5 * time.Second, parallel: true}
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

// packages are the packages whose test binaries the plan runs.
func (p plan) packages() []string {
	var pkgs []string
	add := func(pkg string) {
		if !slices.Contains(pkgs, pkg) {
			pkgs = append(pkgs, pkg)
		}
	}
	if p.seeds {
		for _, ft := range fuzzTargets {
			add(ft.pkg)
		}
	}
	for _, pt := range p.parts {
		add(pt.pkg)
	}
	return pkgs
}

// job is one test run of a plan: its name, and what runs it and
// returns its rows.
type job struct {
	name string
	run  func() []reliability.Figure
}

// jobs are the test runs of the plan, in the order of the table.
func (p plan) jobs(bins testBinaries) []job {
	var jobs []job
	if p.seeds {
		jobs = append(jobs, job{"seed corpora", func() []reliability.Figure { return runSeeds(bins, fuzzTargets) }})
	}
	for _, ft := range p.fuzz {
		jobs = append(jobs, job{ft.name, func() []reliability.Figure { return []reliability.Figure{runFuzz(ft, p.fuzztime)} }})
	}
	for _, pt := range p.parts {
		if !p.parallel {
			jobs = append(jobs, job{pt.name, func() []reliability.Figure { return runPart(bins, pt, pt.tests) }})
			continue
		}
		for _, test := range pt.tests {
			jobs = append(jobs, job{test, func() []reliability.Figure { return runPart(bins, pt, []string{test}) }})
		}
	}
	return jobs
}

// run builds every test binary the plan needs once (and the fuzzer's
// instrumented build), then runs the tests, at once when p.parallel. It
// returns the rows and what the tests took (testTime).
func (p plan) run() ([]reliability.Figure, testTime) {
	bins, err := buildTests(p.packages())
	if err == nil {
		err = warmFuzz(p.fuzz)
	}
	if err != nil {
		return []reliability.Figure{{Part: "build of the test binaries", Figure: err.Error(), Target: "built", OK: false}}, testTime{}
	}
	defer os.RemoveAll(bins.dir)
	jobs := p.jobs(bins)
	results := make([][]reliability.Figure, len(jobs))
	took := make([]time.Duration, len(jobs))
	tt := testTime{loadBefore: loadAverage()}
	cpuBefore := childrenCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for i, j := range jobs {
		do := func() {
			began := time.Now()
			results[i] = j.run()
			took[i] = time.Since(began)
		}
		if !p.parallel {
			do()
			continue
		}
		wg.Go(do)
	}
	wg.Wait()
	tt.wall, tt.cpu, tt.loadAfter = time.Since(start), childrenCPU()-cpuBefore, loadAverage()
	var rows []reliability.Figure
	for i, r := range results {
		rows = append(rows, r...)
		tt.jobs = append(tt.jobs, fmt.Sprintf("%s %s", jobs[i].name, took[i].Round(time.Second)))
	}
	return rows, tt
}

// testTime is what the tests of a mode took: wall time, the CPU time of
// every process they ran (test binaries, control planes, charter
// processes: a quiet 2-core machine needs at least half of it as wall
// time), the machine's load (1-minute average) as they began and ended,
// and each job's wall time.
type testTime struct {
	wall, cpu             time.Duration
	loadBefore, loadAfter string
	jobs                  []string
}

// testBinaries are the test binaries of packages, built once into dir.
type testBinaries struct {
	dir  string
	path map[string]string // by package (./webhook/server)
}

// buildTests compiles the test binaries of pkgs with one go test -c,
// which builds them side by side and reuses the build cache. A binary is
// named after its package's last element, so two packages of one name
// would clash: TestBinaryNamesAreUnique keeps the lists free of that.
func buildTests(pkgs []string) (testBinaries, error) {
	dir, err := os.MkdirTemp("", "charter-reliability-bin-")
	if err != nil {
		return testBinaries{}, err
	}
	bins := testBinaries{dir: dir, path: map[string]string{}}
	if len(pkgs) == 0 {
		return bins, nil
	}
	out, err := goCommand(append([]string{"test", "-c", "-o", dir + string(filepath.Separator)}, pkgs...)...).CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return testBinaries{}, fmt.Errorf("go test -c %s: %v: %s", strings.Join(pkgs, " "), err, lastLines(out, 10))
	}
	for _, pkg := range pkgs {
		bin := filepath.Join(dir, binaryName(pkg))
		if _, err := os.Stat(bin); err != nil {
			os.RemoveAll(dir)
			return testBinaries{}, fmt.Errorf("go test -c %s wrote no %s: %v", pkg, filepath.Base(bin), err)
		}
		bins.path[pkg] = bin
	}
	return bins, nil
}

// binaryName is what go test -c -o dir/ names a package's test binary.
func binaryName(pkg string) string { return path.Base(pkg) + ".test" }

// warmFuzz builds what the fuzzer runs (every package instrumented), by
// fuzzing each target for one execution, so that the fuzzing itself is
// timed apart from its build.
func warmFuzz(targets []fuzzTarget) error {
	for _, ft := range targets {
		out, err := goCommand("test", "-run", "^$", "-fuzz", "^"+ft.name+"$", "-fuzztime", "1x", "-parallel", "1", ft.pkg).CombinedOutput()
		if err != nil {
			return fmt.Errorf("building %s instrumented for %s: %v: %s", ft.pkg, ft.name, err, lastLines(out, 10))
		}
	}
	return nil
}

// runSeeds runs every fuzz target's seeds (f.Add and testdata/fuzz) as
// plain tests, package by package: a crash once found stays fixed.
func runSeeds(bins testBinaries, targets []fuzzTarget) []reliability.Figure {
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
		res := runTests(bins, pkg, byPkg[pkg], "30m")
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
			// No seed failed, yet the run did: a test binary that did
			// not finish. Its last words say which.
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

// runPart runs tests of one part and returns the figures they
// reported; a test that failed without one is a row of its own.
func runPart(bins testBinaries, p part, tests []string) []reliability.Figure {
	res := runTests(bins, p.pkg, tests, p.timeout)
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
		name := p.name
		if len(tests) < len(p.tests) {
			name += " (" + strings.Join(tests, ", ") + ")"
		}
		rows = append(rows, reliability.Figure{Part: name, Figure: fig, Target: p.target, OK: false})
	}
	return rows
}

// testEvent is one line of test2json's output.
type testEvent struct {
	Action string
	Test   string
	Output string
}

type testResult struct {
	events []testEvent
	stderr []byte
	err    error
}

// lastOutput is the last n lines the run printed: its standard error
// (test2json's, or a binary that could not start), else the tests'
// output.
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

// runTests runs the tests named of pkg's test binary in the package's
// folder, as go test -json -count=1 would, and reads its events.
func runTests(bins testBinaries, pkg string, tests []string, timeout string) testResult {
	bin, ok := bins.path[pkg]
	if !ok {
		return testResult{err: fmt.Errorf("no test binary of %s was built", pkg)}
	}
	cmd := goCommand("tool", "test2json", "-t", "-p", strings.TrimPrefix(pkg, "./"), bin,
		"-test.v=test2json", "-test.paniconexit0", "-test.timeout="+timeout, "-test.run=^("+strings.Join(tests, "|")+")$")
	cmd.Dir = filepath.FromSlash(pkg)
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
