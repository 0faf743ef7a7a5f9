package server

import (
	"bufio"
	"fmt"
	"math"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/internal/clitest/manifest"
	"github.com/charter-dev/charter/internal/reliability"
)

// Soak targets (issue #31 part 3).
const (
	soakRate = 500 // reviews a second
	// soakGrowth bounds how much RSS and goroutines may grow from the end
	// of the first minute (warm-up) to the end.
	soakGrowth = 0.10
	// soakDrift bounds how much the last minute's p99 may exceed the
	// second's.
	soakDrift = 0.20
)

// TestReliabilitySoak (issue #31 part 3) sends soakRate reviews a second,
// open loop, for $SOAK minutes (default 10, at least 2) to the admission
// handler with a policy of every kind it evaluates installed
// (testdata/soak-policies.yaml: ClusterPolicies that validate, with
// foreach, and mutate, a Policy, a ValidatingPolicy, a
// NamespacedValidatingPolicy, a MutatingPolicy), alternating validating
// and mutating reviews of a compliant and a refused Pod. After the first
// minute's warm-up, the process's RSS and goroutines must stay flat, the
// p99 latency must not drift, and no review may fail (an answer other
// than 200: a refusal by a policy is an answer). Full mode only.
func TestReliabilitySoak(t *testing.T) {
	reliability.Measure(t)
	minutes := 10
	if s := os.Getenv("SOAK"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			t.Fatalf("SOAK=%q: want a whole number of minutes, at least 2", s)
		}
		minutes = n
	}
	docs, err := manifest.ReadFile("testdata/soak-policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := manifest.DecodePolicies(docs)
	if err != nil {
		t.Fatal(err)
	}
	snapshot, err := policycache.Build(decoded.Policies, nil)
	if err != nil || len(snapshot.Errors) > 0 {
		t.Fatalf("soak policies: %v %v", err, snapshot.Errors)
	}
	h := NewHandler(Options{Policies: staticSnapshots{snapshot}, Mutator: EngineMutator{}})
	refused := compliant()
	refused.name, refused.image = "refused", "nginx:latest"
	reviews := [][]byte{compliant().review(), refused.review()}
	paths := []string{PathValidateFail, PathMutateFail}
	var sent atomic.Int64
	send := func() sample {
		n := sent.Add(1)
		return timedPost(h, paths[(n/2)%2], reviews[n%2])
	}

	type minute struct {
		rss        int64
		goroutines int
		p99        time.Duration
		reviews    int
		errors     int
	}
	var log []minute
	for m := range minutes {
		samples := openLoop(send, soakRate, time.Minute)()
		mm := minute{rss: rssBytes(t), goroutines: runtime.NumGoroutine(), p99: percentile(samples, 0.99), reviews: len(samples)}
		for _, s := range samples {
			if s.code != http.StatusOK {
				if mm.errors == 0 {
					t.Logf("minute %d: HTTP %d %s", m+1, s.code, s.err)
				}
				mm.errors++
			}
		}
		t.Logf("minute %d: %d reviews, %d errors, p99 %s, RSS %d MiB, %d goroutines", m+1, mm.reviews, mm.errors, mm.p99, mm.rss>>20, mm.goroutines)
		log = append(log, mm)
	}
	first, second, last := log[0], log[1], log[len(log)-1]
	total, errors := 0, 0
	for _, m := range log {
		total += m.reviews
		errors += m.errors
	}
	growth := func(from, to float64) float64 { return to/from - 1 }
	rssGrowth := growth(float64(first.rss), float64(last.rss))
	goroutineGrowth := growth(float64(first.goroutines), float64(last.goroutines))
	drift := growth(float64(second.p99), float64(last.p99))
	reliability.Report(t, reliability.Figure{
		Part: fmt.Sprintf("soak: %d min at %d reviews/s, 6 policies of 5 kinds", minutes, soakRate),
		Figure: fmt.Sprintf("RSS %d→%d MiB (%+.0f%%), goroutines %d→%d (%+.0f%%), p99 %s→%s (%+.0f%%), %d errors of %d",
			first.rss>>20, last.rss>>20, 100*rssGrowth, first.goroutines, last.goroutines, 100*goroutineGrowth,
			second.p99.Round(100*time.Microsecond), last.p99.Round(100*time.Microsecond), 100*drift, errors, total),
		Target: fmt.Sprintf("RSS and goroutines ≤ +%.0f%% after warm-up, p99 drift ≤ %.0f%%, 0 errors", 100*soakGrowth, 100*soakDrift),
		OK: rssGrowth <= soakGrowth && last.goroutines <= first.goroutines+int(math.Ceil(soakGrowth*float64(first.goroutines))) &&
			drift <= soakDrift && errors == 0 && float64(total) >= 0.9*soakRate*60*float64(minutes),
	})
}

// rssBytes is the process's resident set size, from /proc/self/status.
func rssBytes(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatalf("reading RSS: %v (the soak measures RSS on Linux)", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
