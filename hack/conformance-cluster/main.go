// Command conformance-cluster runs Kyverno's own cluster e2e tests for the
// CEL policy kinds (chainsaw tests, ../shared/conformance/kyverno-chainsaw)
// against charter: it starts `charter dev --no-sync
// --reports-managed-by=kyverno` (a local control plane with
// kube-controller-manager, charter's CRDs, every controller; reports
// labelled app.kubernetes.io/managed-by: kyverno, as the suite's asserts
// select them, as a cluster that replaced Kyverno would run it), runs
// chainsaw over each test directory with the configuration beside this file,
// and prints passed and failed per directory and overall, and for each
// failure the first failing step and its error.
//
//	go run ./hack/conformance-cluster -charter bin/charter -chainsaw bin/chainsaw [-dirs validating-policies,...] [-run REGEXP]
//
// Tests listed in skip.yaml are not run: the file says, for each, why (a
// Kyverno implementation detail that is not part of the API, an image
// pulled from a public registry, which this machine cannot reach, or a Pod
// that must run, which needs a node the local control plane lacks). The
// list is printed first. It exits non-zero when a test that ran failed.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// defaultDirs are the test directories of the corpus, in the order run.
var defaultDirs = []string{
	"validating-policies", "namespaced-validating-policies",
	"mutating-policies", "namespaced-mutating-policies",
	"generating-policies", "namespaced-generating-policies",
	"deleting-policies", "namespaced-deleting-policies",
	"image-validating-policies", "namespaced-image-validating-policies",
}

// testFile names a chainsaw test inside its folder.
const testFile = "chainsaw-test.yaml"

func main() {
	here := "hack/conformance-cluster"
	charter := flag.String("charter", "bin/charter", "the charter binary")
	chainsaw := flag.String("chainsaw", "bin/chainsaw", "the chainsaw binary")
	corpus := flag.String("dir", "../shared/conformance/kyverno-chainsaw", "the chainsaw tests")
	config := flag.String("config", filepath.Join(here, "chainsaw.yaml"), "chainsaw's configuration")
	skipFile := flag.String("skip", filepath.Join(here, "skip.yaml"), "the tests not run, with the reason")
	dirs := flag.String("dirs", strings.Join(defaultDirs, ","), "comma-separated test directories of -dir to run")
	run := flag.String("run", "", "run only the tests whose path (relative to -dir) matches this regular expression")
	out := flag.String("out", "bin/conformance-cluster", "folder for chainsaw's reports and logs")
	plugins := flag.String("plugins", filepath.Join(here, "kubectl-plugins"), "folder of the kubectl plugins the tests run (kubectl evict), first on chainsaw's PATH")
	reportsRBAC := flag.String("reports-rbac", filepath.Join(here, "reports-controller-rbac.yaml"), "the rights of Kyverno's reports ServiceAccount, applied once charter dev is up")
	flag.Parse()
	if err := runAll(options{
		charter: *charter, chainsaw: *chainsaw, corpus: *corpus, config: *config,
		skipFile: *skipFile, dirs: strings.Split(*dirs, ","), run: *run, out: *out, plugins: *plugins,
		reportsRBAC: *reportsRBAC,
	}, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "conformance-cluster:", err)
		os.Exit(1)
	}
}

type options struct {
	charter, chainsaw, corpus, config, skipFile, run, out string
	// plugins is the folder of kubectl plugins put first on chainsaw's
	// PATH ("" for none).
	plugins string
	// reportsRBAC is the file of the rights of reportsServiceAccount.
	reportsRBAC string
	dirs        []string
}

// errFailures says that the run went through but tests failed.
var errFailures = errors.New("some tests failed")

func runAll(o options, w io.Writer) error {
	skips, err := loadSkips(o.skipFile)
	if err != nil {
		return err
	}
	var filter *regexp.Regexp
	if o.run != "" {
		if filter, err = regexp.Compile(o.run); err != nil {
			return fmt.Errorf("-run: %w", err)
		}
	}
	if o.corpus, err = filepath.Abs(o.corpus); err != nil {
		return err
	}
	if o.plugins != "" {
		if o.plugins, err = filepath.Abs(o.plugins); err != nil {
			return err
		}
	}
	plan, err := planTests(o.corpus, o.dirs, skips, filter)
	if err != nil {
		return err
	}
	printSkips(w, plan)
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	out, err := filepath.Abs(o.out)
	if err != nil {
		return err
	}
	// Some tests write files where they run (validating-policies/context/
	// resource/post writes keys and certificates into its folder): they
	// run in a copy, and the suite stays as it is.
	if o.corpus, err = copySuite(o.corpus, filepath.Join(out, "suite")); err != nil {
		return err
	}

	dev, err := startDev(o.charter, filepath.Join(out, "charter-dev.out"), w)
	if err != nil {
		return err
	}
	defer dev.stop(w)
	if err := applyManifest(dev.kubeconfig, o.reportsRBAC, w); err != nil {
		return err
	}

	var results []dirResult
	for _, d := range plan {
		if len(d.tests) == 0 {
			results = append(results, dirResult{dir: d.dir, skipped: len(d.skipped)})
			continue
		}
		r, err := runDir(o, d, out, dev.kubeconfig, w)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	failed := printSummary(w, results)
	if failed > 0 {
		return errFailures
	}
	return nil
}

// copySuite copies the suite folder to dst (emptied first), files
// writable, and returns dst.
func copySuite(src, dst string) (string, error) {
	if err := os.RemoveAll(dst); err != nil {
		return "", err
	}
	err := filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !e.Type().IsRegular() {
			return fmt.Errorf("copying the suite: %s is not a regular file", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if linked, ok, err := flattenedLink(src, path, data); err != nil {
			return err
		} else if ok {
			data = linked
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("copying the suite %s to %s: %w", src, dst, err)
	}
	return dst, nil
}

// flattenedLink reads through a symbolic link of Kyverno's repository
// that reached the suite as a plain file: Git stores a link as a blob
// holding its target path, and a copy made without links keeps that text
// (namespaced-*-policies/_step-templates/create-policy.yaml reads
// "../../_step-templates/create-policy.yaml"), which chainsaw cannot load
// as a step template. A file whose whole content is one relative path
// naming another regular file inside the suite is such a link: ok is
// true and linked is that file's content, as a checkout with links
// would read. Anything else is left as it is.
func flattenedLink(suite, path string, data []byte) (linked []byte, ok bool, err error) {
	text := string(data)
	if len(data) == 0 || len(data) > 512 || strings.ContainsAny(text, "\n\r\t :") || !strings.HasPrefix(text, "../") {
		return nil, false, nil
	}
	target := filepath.Join(filepath.Dir(path), filepath.FromSlash(text))
	rel, err := filepath.Rel(suite, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, false, nil
	}
	info, err := os.Lstat(target)
	if err != nil || !info.Mode().IsRegular() {
		return nil, false, nil
	}
	if linked, err = os.ReadFile(target); err != nil {
		return nil, false, fmt.Errorf("reading %s, the target of %s: %w", target, path, err)
	}
	return linked, true, nil
}

// skipList is skip.yaml: the tests not run, each with why.
type skipList struct {
	// ImplementationDetails are tests that check something of Kyverno's
	// that is not part of the API.
	ImplementationDetails []skip `json:"implementationDetails"`
	// Network are tests that pull images from public registries.
	Network []skip `json:"network"`
	// Node are tests that need a Pod to run (status.phase Running, exec
	// into it): the local control plane has no kubelet.
	Node []skip `json:"node"`
}

type skip struct {
	Test   string `json:"test"`
	Reason string `json:"reason"`
}

func loadSkips(path string) (skipList, error) {
	var s skipList
	data, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	for _, list := range s.lists() {
		for i, e := range list {
			if e.Test == "" || strings.TrimSpace(e.Reason) == "" {
				return s, fmt.Errorf("%s: entry %d (%q) needs both test and reason", path, i, e.Test)
			}
		}
	}
	return s, nil
}

// skipCategory is the list of skip.yaml an entry is in.
type skipCategory int

const (
	implementationDetail skipCategory = iota
	network
	node
)

// lists are skip.yaml's lists, in skipCategory order.
func (s skipList) lists() [][]skip {
	return [][]skip{s.ImplementationDetails, s.Network, s.Node}
}

// skippedTest is a test of the plan that is not run, and why.
type skippedTest struct {
	skip
	category skipCategory
}

func (s skipList) reason(test string) (skippedTest, bool) {
	for category, list := range s.lists() {
		for _, e := range list {
			if e.Test == test {
				return skippedTest{e, skipCategory(category)}, true
			}
		}
	}
	return skippedTest{}, false
}

// printSkips lists the tests of the plan that are not run (those of the
// directories and -run asked for, not the whole of skip.yaml), each with
// why.
func printSkips(w io.Writer, plan []dirPlan) {
	headings := map[skipCategory]string{
		implementationDetail: "check a Kyverno implementation detail that is not part of the API",
		network:              "need a public registry or cluster DNS (no network here)",
		node:                 "need a node to run a Pod (the local control plane has no kubelet)",
	}
	for _, category := range []skipCategory{implementationDetail, network, node} {
		var lines []string
		for _, d := range plan {
			for _, s := range d.skipped {
				if s.category == category {
					lines = append(lines, fmt.Sprintf("  %s: %s", s.Test, strings.TrimSpace(s.Reason)))
				}
			}
		}
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(w, "not run: %d tests %s\n%s\n", len(lines), headings[category], strings.Join(lines, "\n"))
	}
	fmt.Fprintln(w)
}

// dirPlan is what runs of one test directory.
type dirPlan struct {
	dir     string
	tests   []string // paths relative to the corpus
	skipped []skippedTest
}

// planTests lists each directory's tests, leaving out the skipped ones
// and those -run does not match. A skip entry naming no test is an
// error: the list must say what it skips.
func planTests(corpus string, dirs []string, skips skipList, filter *regexp.Regexp) ([]dirPlan, error) {
	all := map[string]bool{}
	var plan []dirPlan
	for _, dir := range dirs {
		d := dirPlan{dir: dir}
		err := filepath.WalkDir(filepath.Join(corpus, dir), func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != testFile {
				return err
			}
			rel, err := filepath.Rel(corpus, filepath.Dir(path))
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			all[rel] = true
			if filter != nil && !filter.MatchString(rel) {
				return nil
			}
			if s, skipped := skips.reason(rel); skipped {
				d.skipped = append(d.skipped, s)
				return nil
			}
			d.tests = append(d.tests, rel)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing the tests of %s: %w", dir, err)
		}
		plan = append(plan, d)
	}
	if len(dirs) == len(defaultDirs) {
		for _, list := range skips.lists() {
			for _, e := range list {
				if !all[e.Test] {
					return nil, fmt.Errorf("skip list names %s, which is no test of %s", e.Test, corpus)
				}
			}
		}
	}
	return plan, nil
}

// devArgs are charter's arguments: dev, with no repository synced, the
// reports labelled as Kyverno labels its own, background scans reading
// as Kyverno's reports controller ServiceAccount (with the rights of
// reports-controller-rbac.yaml, widened by the suite's permissions.yaml
// files: their RBACPermissionsGranted asserts ask about it), every
// namespace's policies
// granted what they write there (the suite's namespaces are its own and
// Kyverno's namespaced policies write with its background controller's
// rights), cleanup policies deleting as Kyverno's cleanup controller's
// ServiceAccount (the suite's DeletingPolicy tests bind it the rights to
// delete, or withhold them and expect nothing deleted), and charter's log
// kept for the failures.
var devArgs = []string{"dev", "--no-sync", "--reports-managed-by=kyverno", "--namespaced-policy-role=cluster-admin",
	"--cleanup-service-account=kyverno/kyverno-cleanup-controller", "--reports-service-account=" + reportsServiceAccount, "--keep-logs"}

// reportsServiceAccount is Kyverno's reports controller ServiceAccount,
// the subject of reports-controller-rbac.yaml.
const reportsServiceAccount = "kyverno/kyverno-reports-controller"

// applyManifest applies a manifest file to the cluster of kubeconfig with
// kubectl, as a user of the suite would, and says so on w.
func applyManifest(kubeconfig, path string, w io.Writer) error {
	cmd := exec.Command("kubectl", "apply", "-f", path)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl apply -f %s: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	fmt.Fprintf(w, "applied %s\n\n", path)
	return nil
}

// devProcess is `charter dev` (devArgs) running.
type devProcess struct {
	cmd        *exec.Cmd
	kubeconfig string
	done       chan struct{}
}

// startDev starts charter dev and waits for the kubeconfig line it prints
// once the control plane and the controllers run. Its output goes to log.
func startDev(charter, logPath string, w io.Writer) (*devProcess, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(charter, devArgs...)
	cmd.Stderr = log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "starting %s %s (output: %s)\n", charter, strings.Join(devArgs, " "), logPath)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &devProcess{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		defer close(d.done)
		defer log.Close()
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			line := s.Text()
			fmt.Fprintln(log, line)
			if _, path, ok := strings.Cut(line, "✓ kubeconfig: "); ok {
				found <- strings.TrimSpace(path)
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case d.kubeconfig = <-found:
		fmt.Fprintf(w, "charter dev is up; KUBECONFIG=%s\n\n", d.kubeconfig)
		return d, nil
	case <-d.done:
		return nil, fmt.Errorf("charter dev exited before it was up: see %s", logPath)
	case <-time.After(10 * time.Minute):
		d.stop(w)
		return nil, fmt.Errorf("charter dev not up after 10 minutes: see %s", logPath)
	}
}

// stop interrupts charter dev (as Ctrl-C does) and waits for it.
func (d *devProcess) stop(w io.Writer) {
	_ = d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-d.done:
	case <-time.After(2 * time.Minute):
		fmt.Fprintln(w, "charter dev did not stop within 2 minutes: killing it")
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// dirResult is the outcome of one directory's tests.
type dirResult struct {
	dir                     string
	passed, failed, skipped int
	failures                []failure
}

type failure struct {
	test, step, err string
}

// chainsawReport is the part of chainsaw's JSON report read here.
type chainsawReport struct {
	Tests []reportTest `json:"tests"`
}

type reportTest struct {
	BasePath string       `json:"basePath"`
	Name     string       `json:"name"`
	Skipped  bool         `json:"skipped"`
	Steps    []reportStep `json:"steps"`
}

type reportStep struct {
	Name       string `json:"name"`
	Operations []struct {
		Name    string `json:"name"`
		Type    string `json:"type"`
		Failure *struct {
			Err string `json:"error"`
		} `json:"failure"`
	} `json:"operations"`
}

// passLine matches the lines of chainsaw's output that end a test.
var passLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): `)

func runDir(o options, d dirPlan, out, kubeconfig string, w io.Writer) (dirResult, error) {
	res := dirResult{dir: d.dir, skipped: len(d.skipped)}
	logPath := filepath.Join(out, d.dir+".log")
	fmt.Fprintf(w, "%s: %d tests (%d skipped), chainsaw log %s\n", d.dir, len(d.tests), len(d.skipped), logPath)
	report, loadErr, err := runChainsaw(o, d.tests, "report-"+d.dir, out, logPath, kubeconfig, w)
	if err != nil {
		return res, err
	}
	if report != "" {
		return readReport(o.corpus, d.dir, report, res)
	}
	// chainsaw loads every test before it runs any: one it cannot load
	// (a step template the suite lacks) stops the lot. Run them one by
	// one, and count each that does not load as failed, with chainsaw's
	// error.
	fmt.Fprintf(w, "  chainsaw could not load the tests together (%s): running them one by one\n", loadErr)
	for i, t := range d.tests {
		one := filepath.Join(out, fmt.Sprintf("%s-%d.log", d.dir, i))
		report, loadErr, err := runChainsaw(o, []string{t}, fmt.Sprintf("report-%s-%d", d.dir, i), out, one, kubeconfig, w)
		if err != nil {
			return res, err
		}
		if report == "" {
			fmt.Fprintf(w, "  --- FAIL: %s (chainsaw cannot load it)\n", t)
			res.failed++
			res.failures = append(res.failures, failure{test: t, step: "load", err: loadErr})
			continue
		}
		if res, err = readReport(o.corpus, d.dir, report, res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// runChainsaw runs chainsaw over tests, its output into logPath and each
// test's PASS/FAIL line to w, and returns its JSON report, or "" and the
// error chainsaw printed when it wrote none.
func runChainsaw(o options, tests []string, name, out, logPath, kubeconfig string, w io.Writer) (report, loadErr string, err error) {
	args := []string{"test", "--config", o.config, "--report-format", "JSON", "--report-path", out, "--report-name", name, "--no-color"}
	for _, t := range tests {
		args = append(args, "--test-dir", filepath.Join(o.corpus, t))
	}
	log, err := os.Create(logPath)
	if err != nil {
		return "", "", err
	}
	defer log.Close()
	report = filepath.Join(out, name+".json")
	if err := os.Remove(report); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", err
	}
	cmd := exec.Command(o.chainsaw, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if o.plugins != "" {
		// Kyverno's CI installs kubectl plugins some tests run (kubectl
		// evict); ours stand in for them.
		cmd.Env = append(cmd.Env, "PATH="+o.plugins+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return "", "", err
	}
	go func() { pw.CloseWithError(cmd.Wait()) }()
	s := bufio.NewScanner(pr)
	s.Buffer(make([]byte, 1<<20), 1<<24)
	for s.Scan() {
		line := s.Text()
		fmt.Fprintln(log, line)
		if passLine.MatchString(line) {
			fmt.Fprintln(w, "  "+strings.TrimSpace(line))
		}
		if rest, ok := strings.CutPrefix(line, "Error: "); ok {
			loadErr = rest
		}
	}
	// chainsaw exits non-zero when a test failed: its report says which.
	if _, err := os.Stat(report); err != nil {
		if loadErr == "" {
			loadErr = "chainsaw wrote no report: see " + logPath
		}
		return "", loadErr, nil
	}
	return report, "", nil
}

// readReport adds the results of chainsaw's JSON report to res: a test
// with a failed operation fails, named by its path under the corpus with
// its first failing step and error.
func readReport(corpus, dir, path string, res dirResult) (dirResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return res, err
	}
	var rep chainsawReport
	if err := json.Unmarshal(data, &rep); err != nil {
		return res, fmt.Errorf("%s: reading chainsaw's report %s: %w", dir, path, err)
	}
	for _, t := range rep.Tests {
		test := t.BasePath
		if rel, err := filepath.Rel(corpus, t.BasePath); err == nil {
			test = filepath.ToSlash(rel)
		}
		if t.Skipped {
			res.skipped++
			continue
		}
		if f, ok := firstFailure(t.Steps); ok {
			f.test = test
			res.failed++
			res.failures = append(res.failures, f)
			continue
		}
		res.passed++
	}
	return res, nil
}

func firstFailure(steps []reportStep) (failure, bool) {
	for _, st := range steps {
		for _, op := range st.Operations {
			if op.Failure != nil {
				return failure{step: st.Name, err: oneLine(op.Failure.Err)}, true
			}
		}
	}
	return failure{}, false
}

// oneLine keeps an error readable in a summary line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// printSummary prints the table and the failures, and returns how many
// tests failed.
func printSummary(w io.Writer, results []dirResult) int {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "directory\tpassed\tfailed\tskipped\tpass rate\t")
	var p, f, s int
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t\n", r.dir, r.passed, r.failed, r.skipped, rate(r.passed, r.failed))
		p, f, s = p+r.passed, f+r.failed, s+r.skipped
	}
	fmt.Fprintf(tw, "overall\t%d\t%d\t%d\t%s\t\n", p, f, s, rate(p, f))
	_ = tw.Flush()
	var all []failure
	for _, r := range results {
		all = append(all, r.failures...)
	}
	slices.SortFunc(all, func(a, b failure) int { return strings.Compare(a.test, b.test) })
	if len(all) > 0 {
		fmt.Fprintln(w, "\nfailed:")
	}
	for _, fl := range all {
		fmt.Fprintf(w, "  %s [step %s]: %s\n", fl.test, fl.step, fl.err)
	}
	return f
}

func rate(passed, failed int) string {
	if passed+failed == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(passed)/float64(passed+failed))
}
