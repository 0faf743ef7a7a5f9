// Command conformance runs `charter test` over every suite list of the
// shared conformance corpus (../shared/conformance/suites/*.txt) and prints,
// per list, the rows passed, failed and skipped, the wall and CPU time and
// the peak resident memory of the run, against the list's targets where the
// project has set some. The peak is split into anonymous memory (heap,
// stacks) and file-backed pages (mostly charter's own binary, which the
// kernel maps in large folios): sampled every millisecond from
// /proc/PID/status at the largest total seen, next to the kernel's exact
// peak total. It exits non-zero when a list charter claims
// (internal/corpus.Claimed) has a failing row or does not run cleanly;
// the other lists are reported only.
//
//	go run ./hack/conformance -charter bin/charter [-runs N] [-lists validate,cel] [-dir CORPUS]
//	    [-baseline OTHER-CHARTER] [-cpuprofile DIR]
//
// With -runs N each list runs N times and the median of each figure is
// reported: the machine is shared, and one slow or fast run says little. Targets are printed, never enforced:
// timings on a shared machine are no test verdict.
//
// With -baseline, another charter binary (an older build, say) runs each
// list too, its runs alternating with charter's so that both meet the same
// load, and a last table gives each figure of charter over the baseline's:
// on a noisy machine the ratio means more than either figure. The verdict
// is charter's alone. With -cpuprofile DIR every run of charter writes a
// CPU profile of its command to DIR/LIST-N.pprof (charter's hidden
// --cpuprofile flag; go tool pprof reads them).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/charter-dev/charter/internal/benchmem"
	"github.com/charter-dev/charter/internal/corpus"
)

// target is a list's speed and memory target (issue #19), in seconds of
// wall time and MiB of peak RSS.
type target struct {
	wall float64
	rss  float64
}

var targets = map[string]target{
	"validate": {wall: 0.15, rss: 80},
	"cel":      {wall: 0.3, rss: 120},
	"vpol":     {wall: 0.5, rss: 120}, // issue #17
}

// run is the outcome of `charter test` over one list.
type run struct {
	list                    string
	suites                  int
	passed, failed, skipped int
	unrunnable              int // test files that could not be run
	wall, cpu               time.Duration
	rssKiB                  int64 // the kernel's peak RSS (rusage Maxrss)
	split                   benchmem.ProcessMemory
	exit                    int
	summary                 bool // the summary line was found
}

var (
	summaryLine    = regexp.MustCompile(`(?m)^Summary: (\d+) passed, (\d+) failed(?:, (\d+) skipped)?`)
	unrunnableLine = regexp.MustCompile(`(?m)^(\d+) test file\(s\) could not be run`)
)

func main() {
	charter := flag.String("charter", "bin/charter", "the charter binary to run")
	runs := flag.Int("runs", 1, "run each list this many times; report the median of each figure")
	only := flag.String("lists", "", "comma-separated lists to run (default: every list of the corpus)")
	dir := flag.String("dir", "", "the corpus (default: ../shared/conformance from the repository root)")
	baseline := flag.String("baseline", "", "another charter binary to run each list too, alternating with -charter, and compare with")
	profiles := flag.String("cpuprofile", "", "write a CPU profile of each run of -charter into this folder")
	flag.Parse()
	if *profiles != "" {
		if err := os.MkdirAll(*profiles, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
			os.Exit(2)
		}
	}

	if *dir == "" {
		d, err := corpus.Dir()
		if err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
			os.Exit(2)
		}
		*dir = d
	}
	lists, err := corpus.Lists(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(2)
	}
	if *only != "" {
		lists = strings.Split(*only, ",")
	}

	var results, baselines []run
	for _, list := range lists {
		suites, err := corpus.Suites(*dir, list)
		if err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
			os.Exit(2)
		}
		r, b, err := runList(*charter, *baseline, *profiles, list, suites, *runs)
		if err != nil {
			fmt.Fprintf(os.Stderr, "conformance: %s: %v\n", list, err)
			os.Exit(2)
		}
		results = append(results, r)
		baselines = append(baselines, b)
	}
	if *baseline != "" {
		fmt.Printf("baseline %s:\n", *baseline)
		report(os.Stdout, baselines)
		fmt.Printf("\ncharter %s:\n", *charter)
	}
	ok := report(os.Stdout, results)
	if *baseline != "" {
		fmt.Println()
		compare(os.Stdout, baselines, results)
	}
	if !ok {
		os.Exit(1)
	}
}

// runList runs the list runs times with charter and, when baseline is set,
// as many times with baseline, alternating (baseline first), and returns
// the median run of each.
func runList(charter, baseline, profiles, list string, suites []string, runs int) (run, run, error) {
	var all, base []run
	for i := range max(runs, 1) {
		if baseline != "" {
			b, err := runOnce(baseline, list, suites, "")
			if err != nil {
				return b, b, err
			}
			base = append(base, b)
		}
		profile := ""
		if profiles != "" {
			profile = filepath.Join(profiles, fmt.Sprintf("%s-%d.pprof", list, i+1))
		}
		r, err := runOnce(charter, list, suites, profile)
		if err != nil {
			return r, r, err
		}
		all = append(all, r)
	}
	if baseline == "" {
		return median(all), run{}, nil
	}
	return median(all), median(base), nil
}

// runOnce runs `charter test` over the suites once, with a CPU profile
// into profile when it is set.
func runOnce(charter, list string, suites []string, profile string) (run, error) {
	r := run{list: list, suites: len(suites)}
	var out bytes.Buffer
	args := []string{"test"}
	if profile != "" {
		args = append(args, "--cpuprofile", profile)
	}
	cmd := exec.Command(charter, append(args, suites...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return r, err
	}
	stop := benchmem.SampleProcess(cmd.Process.Pid, time.Millisecond)
	err := cmd.Wait()
	r.wall = time.Since(start)
	r.split = stop()
	if cmd.ProcessState == nil {
		return r, err
	}
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.rssKiB = ru.Maxrss // KiB on Linux
	}
	r.exit = cmd.ProcessState.ExitCode()
	text := out.String()
	if m := summaryLine.FindStringSubmatch(text); m != nil {
		r.summary = true
		r.passed, _ = strconv.Atoi(m[1])
		r.failed, _ = strconv.Atoi(m[2])
		r.skipped, _ = strconv.Atoi(m[3])
	}
	if m := unrunnableLine.FindStringSubmatch(text); m != nil {
		r.unrunnable, _ = strconv.Atoi(m[1])
	}
	if corpus.IsClaimed(list) && !r.clean() {
		// Show why: the failing rows are in charter's own output.
		os.Stderr.WriteString(text)
	}
	return r, nil
}

// median is the run whose figures are each the median of the runs' (the
// upper one of an even count); its verdict fields are those of the worst
// run, so that one failing run fails the list.
func median(runs []run) run {
	pick := func(v func(run) int64) int64 {
		vals := make([]int64, len(runs))
		for i, r := range runs {
			vals[i] = v(r)
		}
		slices.Sort(vals)
		return vals[len(vals)/2]
	}
	out := runs[0]
	for _, r := range runs[1:] {
		if !r.clean() {
			out = r
		}
	}
	out.wall = time.Duration(pick(func(r run) int64 { return int64(r.wall) }))
	out.cpu = time.Duration(pick(func(r run) int64 { return int64(r.cpu) }))
	out.rssKiB = pick(func(r run) int64 { return r.rssKiB })
	out.split.Anon = pick(func(r run) int64 { return r.split.Anon })
	out.split.File = pick(func(r run) int64 { return r.split.File })
	return out
}

// clean reports whether a run has nothing against it: every row passed
// (none skipped), every test file ran, and charter exited 0.
func (r run) clean() bool {
	return r.summary && r.failed == 0 && r.skipped == 0 && r.unrunnable == 0 && r.exit == 0 && r.passed > 0
}

// report prints the table and reports whether every claimed list is clean.
func report(w *os.File, results []run) bool {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LIST\tCLAIMED\tSUITES\tPASSED\tFAILED\tSKIPPED\tWALL\tCPU\tPEAK RSS\tANON\tFILE\tTARGET\tVERDICT")
	ok := true
	for _, r := range results {
		claimed := corpus.IsClaimed(r.list)
		verdict := "reported only"
		if claimed {
			verdict = "ok"
			if !r.clean() {
				verdict = "FAIL" + r.why()
				ok = false
			}
		}
		rss := kib(r.rssKiB)
		tgt := "-"
		if t, has := targets[r.list]; has {
			met := "met"
			if r.wall.Seconds() > t.wall || rss > t.rss {
				met = "MISSED"
			}
			tgt = fmt.Sprintf("≤ %gs, ≤ %g MiB: %s", t.wall, t.rss, met)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%.3fs\t%.3fs\t%.1f MiB\t%.1f MiB\t%.1f MiB\t%s\t%s\n",
			r.list, yesNo(claimed), r.suites, r.passed, r.failed, r.skipped,
			r.wall.Seconds(), r.cpu.Seconds(), rss, kib(r.split.Anon), kib(r.split.File), tgt, verdict)
	}
	tw.Flush()
	fmt.Fprintln(w, "PEAK RSS is the kernel's peak; ANON (heap, stacks) and FILE (mapped pages of the binary) are sampled every ms at the largest total seen.")
	fmt.Fprintln(w, "FILE depends on how the kernel cached the binary: it maps whole large folios, so a binary just written by the linker or long in the page cache")
	fmt.Fprintln(w, "shows some 10-20 MiB more than a fresh copy of it (cp bin/charter /tmp/c) for the same pages touched; compare binaries copied the same way.")
	if !ok {
		fmt.Fprintf(w, "\nclaimed lists (%s) must pass every row: see the failures above\n", strings.Join(corpus.Claimed, ", "))
	}
	return ok
}

func (r run) why() string {
	var why []string
	switch {
	case !r.summary:
		why = append(why, "no summary line")
	case r.passed == 0:
		why = append(why, "nothing passed")
	}
	if r.failed > 0 {
		why = append(why, fmt.Sprintf("%d failed", r.failed))
	}
	if r.skipped > 0 {
		why = append(why, fmt.Sprintf("%d skipped", r.skipped))
	}
	if r.unrunnable > 0 {
		why = append(why, fmt.Sprintf("%d test files could not run", r.unrunnable))
	}
	if r.exit != 0 && len(why) == 0 {
		why = append(why, fmt.Sprintf("exit %d", r.exit))
	}
	return " (" + strings.Join(why, ", ") + ")"
}

// compare prints, per list, charter's median figures over the baseline's.
func compare(w *os.File, baselines, results []run) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LIST\tWALL\tCPU\tPEAK RSS\tANON\tFILE")
	ratio := func(b, c float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", c/b)
	}
	for i, c := range results {
		b := baselines[i]
		fmt.Fprintf(tw, "%s\t%.3f -> %.3fs (%s)\t%.3f -> %.3fs (%s)\t%.1f -> %.1f MiB (%s)\t%.1f -> %.1f MiB (%s)\t%.1f -> %.1f MiB (%s)\n", c.list,
			b.wall.Seconds(), c.wall.Seconds(), ratio(b.wall.Seconds(), c.wall.Seconds()),
			b.cpu.Seconds(), c.cpu.Seconds(), ratio(b.cpu.Seconds(), c.cpu.Seconds()),
			kib(b.rssKiB), kib(c.rssKiB), ratio(float64(b.rssKiB), float64(c.rssKiB)),
			kib(b.split.Anon), kib(c.split.Anon), ratio(float64(b.split.Anon), float64(c.split.Anon)),
			kib(b.split.File), kib(c.split.File), ratio(float64(b.split.File), float64(c.split.File)))
	}
	tw.Flush()
	fmt.Fprintln(w, "baseline -> charter, medians of runs alternated between the two binaries; a ratio below 1 is charter's gain.")
}

// kib converts KiB to MiB.
func kib(k int64) float64 { return float64(k) / 1024 }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
