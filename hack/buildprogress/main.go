// Command buildprogress builds one Go main package with `go build -v` and
// prints how far the build has got every few seconds, instead of nothing
// for the 6 to 15 minutes kube-apiserver takes to compile the first time,
// or the 6 minutes charter itself takes on a fresh machine:
//
//	go run ./hack/buildprogress -C harness/tools -o bin/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
//	CGO_ENABLED=0 go run ./hack/buildprogress -ldflags '-s -w' -o bin/charter ./cmd/charter
//
// The package count it prints against is `go list -deps`: packages already
// in Go's build cache are not compiled again, so a build may end below it.
// Compiler errors pass through as they come, and the exit status is go
// build's.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

func main() {
	fs := flag.NewFlagSet("buildprogress", flag.ExitOnError)
	dir := fs.String("C", ".", "folder to run go in (the module the package belongs to)")
	out := fs.String("o", "", "output binary (absolute, or relative to -C)")
	every := fs.Duration("every", 15*time.Second, "how often to print progress")
	goCmd := fs.String("go", "go", "the go command")
	ldflags := fs.String("ldflags", "", "go build's -ldflags")
	if err := fs.Parse(os.Args[1:]); err != nil || fs.NArg() != 1 || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: buildprogress [-C dir] [-every 15s] [-go go] [-ldflags flags] -o output package")
		os.Exit(2)
	}
	pkg := fs.Arg(0)
	var buildFlags []string
	if *ldflags != "" {
		buildFlags = append(buildFlags, "-ldflags", *ldflags)
	}
	os.Exit(run(*goCmd, *dir, *out, pkg, buildFlags, *every, os.Stdout, os.Stderr))
}

// run builds pkg into out, with buildFlags after go build's own, and
// returns go build's exit status.
func run(goCmd, dir, out, pkg string, buildFlags []string, every time.Duration, stdout, stderr io.Writer) int {
	name := filepath.Base(out)
	list := exec.Command(goCmd, "list", "-deps", pkg)
	list.Dir, list.Stderr = dir, stderr
	deps, err := list.Output()
	if err != nil {
		fmt.Fprintf(stderr, "%s: listing its packages: %v\n", name, err)
		return 1
	}
	total := bytes.Count(deps, []byte("\n"))

	args := append([]string{"build", "-v", "-trimpath"}, buildFlags...)
	build := exec.Command(goCmd, append(args, "-o", out, pkg)...)
	build.Dir = dir
	pipe, err := build.StderrPipe()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	build.Stdout = stdout
	start := time.Now()
	if err := build.Start(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	p := &progress{name: name, total: total, start: start, w: stdout}
	done := make(chan struct{})
	go func() {
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
				p.print(time.Now())
			}
		}
	}()
	p.read(pipe, stderr)
	err = build.Wait()
	close(done)
	if err != nil {
		fmt.Fprintf(stderr, "%s: build failed after %s: %v\n", name, time.Since(start).Round(time.Second), err)
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode()
		}
		return 1
	}
	fmt.Fprintf(stdout, "  %s: built in %s (%d packages compiled, %d from the build cache or none needed)\n",
		name, time.Since(start).Round(time.Second), p.count(), max(total-p.count(), 0))
	return 0
}

// progress counts the packages go build -v names as it compiles them.
type progress struct {
	name  string
	total int
	start time.Time
	w     io.Writer

	mu       sync.Mutex
	compiled int
}

// read counts package lines from go build -v and passes anything else
// (compiler errors) to errs as it comes.
func (p *progress) read(r io.Reader, errs io.Writer) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		line := s.Text()
		if isPackageLine(line) {
			p.mu.Lock()
			p.compiled++
			p.mu.Unlock()
			continue
		}
		fmt.Fprintln(errs, line)
	}
}

func (p *progress) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.compiled
}

func (p *progress) print(now time.Time) {
	fmt.Fprintln(p.w, p.line(now))
}

// line is e.g. "  kube-apiserver: 812 of at most 2240 packages compiled (36%), 3m10s".
func (p *progress) line(now time.Time) string {
	n := p.count()
	pct := 0
	if p.total > 0 {
		pct = min(100*n/p.total, 100)
	}
	return fmt.Sprintf("  %s: %d of at most %d packages compiled (%d%%), %s", p.name, n, p.total, pct, now.Sub(p.start).Round(time.Second))
}

// isPackageLine tells go build -v's package names (one per line, no
// spaces) from compiler output ("# pkg", "file.go:1:2: message").
func isPackageLine(line string) bool {
	return line != "" && !strings.ContainsAny(line, " \t#") && !strings.Contains(line, ".go:")
}
