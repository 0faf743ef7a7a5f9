// Command benchgitops measures charter's GitOps path on the local control
// plane, with charter running as a separate process exactly as deployed
// (`charter serve --controllers=admission,gitsync --receiver-addr=...`):
//
//  1. push to enforced: a commit adds an Enforce policy, the receiver is
//     called as a Git host would, and the clock runs until the
//     PolicyRepository is Ready at that commit and until a dry-run Pod
//     that breaks the policy is refused by charter's webhook; repeated
//     -runs times, min/median/max printed;
//
//  2. the same through an OCI PolicyRepository: an artifact in Flux's
//     format pushed to a registry on loopback and Docker Hub's webhook
//     called, the clock started before the push; then polls of the
//     unchanged tag, and the blob bytes they pulled (the goal is none);
//
//  3. a repository of -policies generated policies: the time from creating
//     its PolicyRepository to Ready, and charter's peak resident memory.
//
//     go run ./hack/benchgitops -charter bin/charter
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/charter-dev/charter/hack/benchscale/figures"
	"github.com/charter-dev/charter/internal/controlplane"
)

// Targets of issue #7, printed beside the figures.
const (
	targetPushToEnforced = 2 * time.Second
	targetLargeSync      = 20 * time.Second
	targetLargeRSS       = 150 << 20
)

func main() {
	charter := flag.String("charter", "bin/charter", "charter binary to run")
	runs := flag.Int("runs", 5, "push-to-enforced rounds")
	policies := flag.Int("policies", 500, "policies in the large repository")
	polls := flag.Int("polls", 5, "polls of an unchanged OCI tag whose pulled bytes are counted")
	keep := flag.Bool("keep", false, "keep the work folder (charter's log, the repositories)")
	largeControllers := flag.String("large-controllers", "gitsync", "controllers of the charter process that syncs the large repository; "+
		"gitsync alone measures the sync, admission,gitsync the whole process (its policy cache compiles every policy too)")
	largeOnly := flag.Bool("large-only", false, "measure the sync of the large repository alone (no push rounds), as make bench-scale does")
	pointFile := flag.String("point-file", "", "also write the large sync's figures as a point of make bench-scale's GitOps curve (JSON) to this file")
	flag.Parse()
	if err := run(*charter, *runs, *policies, *polls, *keep, *largeControllers, *largeOnly, *pointFile); err != nil {
		fmt.Fprintln(os.Stderr, "benchgitops:", err)
		os.Exit(1)
	}
}

func run(charterBin string, runs, nPolicies, polls int, keep bool, largeControllers string, largeOnly bool, pointFile string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if runs < 1 || nPolicies < 1 {
		return fmt.Errorf("-runs and -policies must be at least 1")
	}
	charterBin, err := filepath.Abs(charterBin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(charterBin); err != nil {
		return fmt.Errorf("charter binary: %w (run make build)", err)
	}
	work, err := os.MkdirTemp("", "benchgitops-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("work folder:", work)
	} else {
		defer os.RemoveAll(work)
	}

	root, err := controlplane.ModuleRoot()
	if err != nil {
		return err
	}
	fmt.Println("starting the local control plane")
	cp, err := controlplane.Start(ctx, controlplane.WithCRDs(filepath.Join(root, "config", "crd", "bases")))
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()

	b, err := newBench(cp.RESTConfig(), work)
	if err != nil {
		return err
	}
	if err := b.prepare(ctx); err != nil {
		return err
	}
	if largeOnly {
		proc, err := startReady(ctx, charterBin, cp.KubeconfigPath(), work, largeControllers)
		if err != nil {
			return err
		}
		defer proc.stop()
		large, err := syncLarge(ctx, b, proc, nPolicies, largeControllers)
		if err != nil {
			return err
		}
		printLarge(os.Stdout, nPolicies, large)
		return writePoint(pointFile, nPolicies, large)
	}
	reg, err := startRegistry()
	if err != nil {
		return err
	}
	defer reg.stop()
	const pushControllers = "admission,gitsync"
	// The egress guard blocks loopback: the registry's address is let
	// through, as an operator does for a registry on loopback.
	proc, err := startReady(ctx, charterBin, cp.KubeconfigPath(), work, pushControllers, "--egress-allow="+reg.host)
	if err != nil {
		return err
	}
	defer proc.stop()
	push, err := b.pushToEnforced(ctx, proc, runs)
	if err != nil {
		return fmt.Errorf("push to enforced: %w (charter's log: %s)", err, proc.logPath)
	}
	ociPush, err := b.ociPushToEnforced(ctx, proc, reg, runs, polls)
	if err != nil {
		return fmt.Errorf("OCI push to enforced: %w (charter's log: %s)", err, proc.logPath)
	}

	if largeControllers != pushControllers {
		// A fresh process, so its memory is the large sync's alone.
		proc.stop()
		if proc, err = startReady(ctx, charterBin, cp.KubeconfigPath(), work, largeControllers); err != nil {
			return err
		}
		defer proc.stop()
	}
	large, err := syncLarge(ctx, b, proc, nPolicies, largeControllers)
	if err != nil {
		return err
	}
	printTable(os.Stdout, runs, push, ociPush, nPolicies, large)
	return writePoint(pointFile, nPolicies, large)
}

// startReady starts charter serve with controllers and waits until it is
// ready.
func startReady(ctx context.Context, charterBin, kubeconfig, work, controllers string, flags ...string) (*charterProcess, error) {
	fmt.Println("starting charter serve --controllers=" + controllers)
	proc, err := startCharter(ctx, charterBin, kubeconfig, work, controllers, flags...)
	if err != nil {
		return nil, err
	}
	if err := proc.waitReady(ctx, time.Minute); err != nil {
		proc.stop()
		return nil, err
	}
	return proc, nil
}

// syncLarge measures the sync of nPolicies by proc, which runs controllers.
func syncLarge(ctx context.Context, b *bench, proc *charterProcess, nPolicies int, controllers string) (largeResult, error) {
	large, err := b.largeSync(ctx, proc, nPolicies)
	if err != nil {
		return large, fmt.Errorf("%d policies: %w (charter's log: %s)", nPolicies, err, proc.logPath)
	}
	large.controllers = controllers
	return large, nil
}

// writePoint writes the large sync as a point of make bench-scale's GitOps
// curve.
func writePoint(path string, nPolicies int, large largeResult) error {
	return figures.Write(path, figures.Point{Curve: "gitops", Size: nPolicies, Figures: map[string]float64{
		"seconds":        large.ready.Seconds(),
		"rss_peak_mib":   float64(large.rssPeak) / (1 << 20),
		"rss_before_mib": float64(large.rssBefore) / (1 << 20),
	}})
}

// pushRound is one push-to-enforced measurement.
type pushRound struct {
	// ready is the time from the receiver call to the PolicyRepository
	// being Ready at the pushed revision; policyReady, to the new
	// ClusterPolicy being Ready (served by admission); enforced, to the
	// first refused dry-run Pod.
	ready, policyReady, enforced time.Duration
}

// largeResult is the large repository's measurement.
type largeResult struct {
	// controllers are those of the charter process measured.
	controllers string
	ready       time.Duration
	// rssBefore is charter's resident memory before the sync; rssPeak the
	// highest sampled during it; hwm the kernel's high-water mark of the
	// process's whole life.
	rssBefore, rssPeak, hwm int64
}

func printTable(w *os.File, runs int, push []pushRound, ociPush ociResult, nPolicies int, large largeResult) {
	row := func(name string, ds []time.Duration, target time.Duration) {
		lo, med, hi := stats(ds)
		t := ""
		if target > 0 {
			t = fmt.Sprintf("< %s %s", target, verdict(hi < target))
		}
		fmt.Fprintf(w, "  %-40s %9s %9s %9s %10s\n", name, ms(lo), ms(med), ms(hi), t)
	}
	rounds := func(title, start string, push []pushRound) {
		ready := make([]time.Duration, len(push))
		policyReady := make([]time.Duration, len(push))
		enforced := make([]time.Duration, len(push))
		for i, r := range push {
			ready[i], policyReady[i], enforced[i] = r.ready, r.policyReady, r.enforced
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "%-42s %9s %9s %9s %10s\n", fmt.Sprintf("%s (%d runs)", title, runs), "min", "median", "max", "target")
		row(start+" -> PolicyRepository Ready", ready, 0)
		row(start+" -> ClusterPolicy Ready", policyReady, 0)
		row(start+" -> bad Pod refused", enforced, targetPushToEnforced)
	}
	rounds("Git: push to enforced", "receiver call", push)
	rounds("OCI: push to enforced", "push", ociPush.rounds)
	perPoll := int64(0)
	if ociPush.unchangedPolls > 0 {
		perPoll = ociPush.blobBytes / int64(ociPush.unchangedPolls)
	}
	fmt.Fprintf(w, "  %-40s %29s %10s\n", fmt.Sprintf("blob bytes per unchanged poll (%d polls)", ociPush.unchangedPolls),
		fmt.Sprintf("%d B", perPoll), fmt.Sprintf("0 B %s", verdict(ociPush.blobBytes == 0)))
	fmt.Fprintf(w, "  %-40s %29s\n", fmt.Sprintf("blob bytes the %d pushes pulled", len(ociPush.rounds)), fmt.Sprintf("%d B", ociPush.pushBlobBytes))
	printLarge(w, nPolicies, large)
}

// printLarge prints the sync of the large repository against its targets.
func printLarge(w *os.File, nPolicies int, large largeResult) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-42s %29s %10s\n", fmt.Sprintf("sync of %d policies", nPolicies), "", "target")
	fmt.Fprintf(w, "  %-40s %29s\n", "charter serve --controllers=", large.controllers)
	fmt.Fprintf(w, "  %-40s %29s %10s\n", "PolicyRepository created -> Ready", ms(large.ready),
		fmt.Sprintf("< %s %s", targetLargeSync, verdict(large.ready < targetLargeSync)))
	fmt.Fprintf(w, "  %-40s %29s %10s\n", "charter peak RSS during the sync", mib(large.rssPeak),
		fmt.Sprintf("< %s %s", mib(targetLargeRSS), verdict(large.rssPeak < targetLargeRSS)))
	fmt.Fprintf(w, "  %-40s %29s\n", "charter RSS before the sync", mib(large.rssBefore))
	fmt.Fprintf(w, "  %-40s %29s\n", "charter RSS high-water mark (VmHWM)", mib(large.hwm))
}

func stats(ds []time.Duration) (lo, med, hi time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[0], s[len(s)/2], s[len(s)-1]
}

func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func mib(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

// quote makes a string safe inside a double-quoted YAML scalar.
func quote(s string) string { return strings.ReplaceAll(s, `"`, `\"`) }
