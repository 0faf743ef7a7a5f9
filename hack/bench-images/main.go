// Command bench-images measures image verification on a loopback
// registry (make bench-images): first-time key-based verification per
// image, the p99 a cached verifyImages rule adds to a review, the
// verifications one core sustains, and a steady 200 reviews/s over 20
// distinct images. It prints each figure against its target.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/imagetest"
)

// fatalT is imagetest.T for a program: a failure ends it.
type fatalT struct{ cleanups []func() }

func (t *fatalT) Helper()           {}
func (t *fatalT) Fatal(args ...any) { fmt.Fprintln(os.Stderr, args...); os.Exit(1) }
func (t *fatalT) Fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}
func (t *fatalT) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }

const baseline = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-labels}
spec:
  validationFailureAction: Enforce
  rules:
  - name: check-app
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: an app label is required
      pattern: {metadata: {labels: {app: "?*"}}}
`

func imagePolicy(host, pem string) string {
	key, _ := json.Marshal(pem)
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: signed-images}
spec:
  validationFailureAction: Enforce
  rules:
  - name: verify
    match: {any: [{resources: {kinds: [Pod]}}]}
    verifyImages:
    - imageReferences: ["%s/*"]
      attestors:
      - entries:
        - keys:
            publicKeys: %s
            rekor: {url: "http://127.0.0.1:1", ignoreTlog: true}
`, host, key)
}

func compile(docs ...string) *engine.PolicySet {
	var ps []kyvernov1.PolicyInterface
	for _, d := range docs {
		var p kyvernov1.ClusterPolicy
		if err := yaml.UnmarshalStrict([]byte(d), &p); err != nil {
			panic(err)
		}
		ps = append(ps, &p)
	}
	set, err := engine.Compile(ps)
	if err != nil {
		panic(err)
	}
	return set
}

func pod(i int, image string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": fmt.Sprintf("p%d", i), "namespace": "default", "labels": map[string]any{"app": "a"}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": image}}}}
}

// review runs a review as admission does (mutating, then validating on
// the result) and reports whether every rule passed.
func review(ctx context.Context, set *engine.PolicySet, opts []engine.EvalOption, obj map[string]any) bool {
	m := set.Mutate(ctx, &engine.Request{Operation: kyvernov1.Create, Object: obj}, opts...)
	v := set.Validate(ctx, &engine.Request{Operation: kyvernov1.Create, Object: m.Object}, opts...)
	for _, r := range [][]engine.PolicyResponse{m.Policies, v.Policies} {
		for _, p := range r {
			for _, rr := range p.Rules {
				if rr.Status != engine.StatusPass {
					return false
				}
			}
		}
	}
	return true
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func main() {
	images := flag.Int("images", 20, "distinct signed images")
	reviews := flag.Int("reviews", 5000, "reviews timed for the cached p99")
	rate := flag.Int("rate", 200, "reviews per second in the steady run")
	steady := flag.Duration("duration", 5*time.Second, "length of the steady run")
	flag.Parse()

	t := &fatalT{}
	defer func() {
		for _, f := range t.cleanups {
			f()
		}
	}()
	reg := imagetest.NewRegistry(t)
	key := imagetest.NewKey(t)
	imgs := make([]imagetest.Image, *images)
	for i := range imgs {
		imgs[i] = reg.Push(t, fmt.Sprintf("app%d", i), "v1")
		reg.Sign(t, imgs[i], key.Signer, imagetest.SignOptions{})
	}
	ctx := context.Background()
	policy := imagePolicy(reg.Host, key.PublicPEM)
	check := func(img imagetest.Image) loader.ImageCheck {
		var p kyvernov1.ClusterPolicy
		_ = yaml.Unmarshal([]byte(policy), &p)
		return loader.ImageCheck{Image: img.DigestRef, Attestor: p.Spec.Rules[0].VerifyImages[0].Attestors[0].Entries[0], Scope: "bench/verify"}
	}

	// 1. First-time verification: no cache, every image once.
	uncached := imageverify.New(imageverify.Options{Egress: reg.Egress()})
	var first []time.Duration
	for round := 0; round < 3; round++ {
		for _, img := range imgs {
			start := time.Now()
			if _, err := uncached.VerifySignatures(ctx, check(img)); err != nil {
				t.Fatalf("verifying %s: %v", img.Ref, err)
			}
			first = append(first, time.Since(start))
		}
	}

	// 2. Cached review: the p99 a verifyImages rule adds over the same
	// review without it.
	cached := imageverify.New(imageverify.Options{Egress: reg.Egress(), Cache: imageverify.NewCache(1000, time.Hour, nil)})
	opts := []engine.EvalOption{engine.WithLoaders(loader.Loaders{ImageVerifier: cached})}
	without, with := compile(baseline), compile(baseline, imagePolicy(reg.Host, key.PublicPEM))
	for i, img := range imgs { // warm the cache
		if !review(ctx, with, opts, pod(i, img.DigestRef)) {
			t.Fatalf("warm-up review of %s did not pass", img.Ref)
		}
	}
	// The two sets are timed in turns, review by review, so that both see
	// the same load from other processes. Wall time is what admission
	// waits; the thread's CPU time is what the rule costs, which other
	// processes on a shared machine cannot inflate.
	var base, verified, baseCPU, verifiedCPU []time.Duration
	runtime.LockOSThread()
	for i := range *reviews {
		for _, set := range []*engine.PolicySet{without, with} {
			obj := pod(i, imgs[i%len(imgs)].DigestRef)
			cpu0, start := threadCPU(), time.Now()
			review(ctx, set, opts, obj)
			wall, cpu := time.Since(start), threadCPU()-cpu0
			if set == with {
				verified, verifiedCPU = append(verified, wall), append(verifiedCPU, cpu)
			} else {
				base, baseCPU = append(base, wall), append(baseCPU, cpu)
			}
		}
	}
	runtime.UnlockOSThread()
	added := percentile(verified, 0.99) - percentile(base, 0.99)
	addedCPU := percentile(verifiedCPU, 0.99) - percentile(baseCPU, 0.99)

	// 3. Verifications per second on one core.
	prev := runtime.GOMAXPROCS(1)
	var n int
	deadline := time.Now().Add(2 * time.Second)
	start := time.Now()
	for time.Now().Before(deadline) {
		if _, err := uncached.VerifySignatures(ctx, check(imgs[n%len(imgs)])); err != nil {
			t.Fatal(err)
		}
		n++
	}
	perCore := float64(n) / time.Since(start).Seconds()
	runtime.GOMAXPROCS(prev)

	// 4. Steady load: rate reviews/s over the images named by tag (one
	// digest lookup each, verification from the cache).
	var errs, done atomic.Int64
	var lat []time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Reviews start on a fixed schedule (not a ticker, which drops ticks
	// when the machine is busy), each in its own goroutine.
	total := int(steady.Seconds() * float64(*rate))
	interval := time.Second / time.Duration(*rate)
	began := time.Now()
	for i := range total {
		time.Sleep(time.Until(began.Add(time.Duration(i) * interval)))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s := time.Now()
			if !review(ctx, with, opts, pod(i, imgs[i%len(imgs)].Ref)) {
				errs.Add(1)
			}
			mu.Lock()
			lat = append(lat, time.Since(s))
			mu.Unlock()
			done.Add(1)
		}(i)
	}
	offered := float64(total) / time.Since(began).Seconds()
	wg.Wait()

	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	fmt.Printf("bench-images: %d images on a loopback registry, %d cores, load average %s\n", len(imgs), runtime.NumCPU(), loadAverage())
	fmt.Printf("%-52s %12s %12s  %s\n", "measure", "result", "target", "")
	fmt.Printf("%-52s %12s %12s  %s\n", "first-time key verification per image, p50", percentile(first, 0.5).Round(10*time.Microsecond), "", "")
	fmt.Printf("%-52s %12s %12s  %s\n", "first-time key verification per image, max", percentile(first, 1).Round(10*time.Microsecond), "< 50ms", verdict(percentile(first, 1) < 50*time.Millisecond))
	fmt.Printf("%-52s %12s %12s  %s\n", "cached review p50 / p99 (without verifyImages)", percentile(base, 0.5).Round(time.Microsecond).String()+" / "+percentile(base, 0.99).Round(time.Microsecond).String(), "", "")
	fmt.Printf("%-52s %12s %12s  %s\n", "cached review p50 / p99 (with verifyImages)", percentile(verified, 0.5).Round(time.Microsecond).String()+" / "+percentile(verified, 0.99).Round(time.Microsecond).String(), "", "")
	fmt.Printf("%-52s %12s %12s  %s\n", "p99 added by a cached verifyImages rule, wall", added.Round(time.Microsecond), "< 1ms", verdict(added < time.Millisecond))
	fmt.Printf("%-52s %12s %12s  %s\n", "p99 added by a cached verifyImages rule, CPU", addedCPU.Round(time.Microsecond), "< 1ms", verdict(addedCPU < time.Millisecond))
	fmt.Printf("%-52s %12.0f %12s  %s\n", "verifications per second on one core", perCore, "", "")
	fmt.Printf("%-52s %12s %12s  %s\n", fmt.Sprintf("%.0f reviews/s for %s by tag: errors", offered, *steady), fmt.Sprintf("%d of %d", errs.Load(), done.Load()), "0", verdict(errs.Load() == 0 && done.Load() > 0))
	if len(lat) > 0 {
		fmt.Printf("%-52s %12s %12s  %s\n", "  review latency p99 at that rate (digest lookup)", percentile(lat, 0.99).Round(time.Microsecond), "", "")
	}
}

// threadCPU is the CPU time the calling OS thread has used (the caller
// locks its goroutine to the thread).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// loadAverage is the machine's 1-minute load average, which says how much
// the wall-clock figures owe to other processes.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}
