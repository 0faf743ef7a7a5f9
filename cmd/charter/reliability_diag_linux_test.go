package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pprofEnv, set for a charter serve child process (faultCluster's
// charterEnv), makes it serve net/http/pprof at that address, so that a
// test can read where its goroutines wait while it is under load.
const pprofEnv = "CHARTER_TEST_PPROF_ADDR"

// goroutineDumpsEnv names a folder: the soak through the API server then
// writes charter's goroutines there every two seconds
// (goroutines-<seconds into the load>.txt), to tell a review that waits
// on something of charter's (a lock, a queue, a call) from one the
// machine starves.
const goroutineDumpsEnv = "SOAK_GOROUTINE_DUMPS"

func init() {
	addr := os.Getenv(pprofEnv)
	if addr == "" || os.Getenv(devHelperEnv) == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	go func() { _ = http.ListenAndServe(addr, mux) }() //nolint:gosec // a test's loopback diagnostics
}

// goroutineDumper writes a process's goroutines to a folder at an
// interval until stopped.
type goroutineDumper struct {
	stopped, done chan struct{}
}

func startGoroutineDumps(t *testing.T, addr, dir string, every time.Duration) *goroutineDumper {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := &goroutineDumper{stopped: make(chan struct{}), done: make(chan struct{})}
	began := time.Now()
	go func() {
		defer close(d.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-d.stopped:
				return
			case <-tick.C:
			}
			resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=2")
			if err != nil {
				continue
			}
			name := filepath.Join(dir, fmt.Sprintf("goroutines-%04d.txt", int(time.Since(began).Seconds())))
			if f, err := os.Create(name); err == nil {
				fmt.Fprintf(f, "at %s\n", time.Now().Format("15:04:05.000"))
				_, _ = io.Copy(f, resp.Body)
				f.Close()
			}
			resp.Body.Close()
		}
	}()
	t.Logf("charter's goroutines every %s in %s", every, dir)
	return d
}

func (d *goroutineDumper) stop() {
	close(d.stopped)
	<-d.done
}

// slowReviews are the lines of charter's admission latency histogram
// (kyverno_admission_review_duration_seconds, from the start of its HTTP
// handling to the answer) at 1 s, 5 s and every review: how many reviews
// took charter's handler long, by webhook.
func slowReviews(metricsAddr string) (string, error) {
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "kyverno_admission_review_duration_seconds_bucket") &&
			(strings.Contains(line, `le="1"`) || strings.Contains(line, `le="5"`) || strings.Contains(line, `le="+Inf"`)) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n"), sc.Err()
}
