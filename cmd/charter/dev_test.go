package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/internal/controlplane"
)

// readyWriter collects output and closes ready once marker has been written.
type readyWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	ready  chan struct{}
	once   sync.Once
}

// devRESTConfig is the client config of the kubeconfig a charter dev
// whose output is out names.
func devRESTConfig(t *testing.T, out string) *rest.Config {
	t.Helper()
	m := kubeconfigLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no kubeconfig path in the output:\n%s", out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", m[1])
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newReadyWriter(marker string) *readyWriter {
	return &readyWriter{marker: marker, ready: make(chan struct{})}
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.marker) {
		w.once.Do(func() { close(w.ready) })
	}
	return n, err
}

func (w *readyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// startDev runs `charter <args>` until it prints that it is ready, and
// returns its output so far and a function that interrupts it and returns
// its error and full output.
func startDev(t *testing.T, args ...string) (string, func() (error, string)) {
	t.Helper()
	out, interrupt := startDevLive(t, args...)
	return out.String(), interrupt
}

// startDevLive is startDev returning the output as it grows.
func startDevLive(t *testing.T, args ...string) (*readyWriter, func() (error, string)) {
	t.Helper()
	return startDevUntil(t, "Ctrl-C stops charter dev.", args...)
}

// startDevUntil is startDevLive for a charter dev that says it is ready
// with marker: with --no-sync, it prints no hint, and its kubeconfig line
// is the last.
func startDevUntil(t *testing.T, marker string, args ...string) (*readyWriter, func() (error, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := newReadyWriter(marker)
	cmd := newRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(out)
	var runErr error
	exited := make(chan struct{})
	go func() { runErr = cmd.ExecuteContext(ctx); close(exited) }()
	t.Cleanup(func() { cancel(); <-exited })

	select {
	case <-out.ready:
	case <-exited:
		t.Fatalf("charter %s exited before it was ready: %v\n%s", strings.Join(args, " "), runErr, out)
	// Generous: on a loaded machine the control plane alone can take
	// a minute to start.
	case <-time.After(5 * time.Minute):
		t.Fatalf("charter %s not ready within 5 minutes:\n%s", strings.Join(args, " "), out)
	}
	interrupt := func() (error, string) {
		cancel()
		select {
		case <-exited:
			return runErr, out.String()
		case <-time.After(time.Minute):
			t.Fatalf("charter dev did not stop within a minute of the interrupt:\n%s", out)
			return nil, ""
		}
	}
	return out, interrupt
}

// waitForOutput waits until the output holds want.
func waitForOutput(t *testing.T, out *readyWriter, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output does not say %q within %s:\n%s", want, within, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func crdDir(t *testing.T) string {
	t.Helper()
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "config", "crd", "bases")
}

var (
	kubeconfigLine = regexp.MustCompile(`kubeconfig: (\S+)`)
	revisionLine   = regexp.MustCompile(`Ready in \S+: \S+@sha1:[0-9a-f]{40} applied`)
	metricsLine    = regexp.MustCompile(`metrics at (http://127\.0\.0\.1:\d+/metrics)`)
)

// httpGet returns the body at url.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(body)
}

func TestDevRunsCharterWithThisCheckoutsDevEnvironment(t *testing.T) {
	out, interrupt := startDev(t, "dev", "--crds", crdDir(t))

	m := kubeconfigLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no kubeconfig path in the output:\n%s", out)
	}
	kubeconfig := m[1]
	for _, want := range []string{
		"export KUBECONFIG=" + kubeconfig + "\n  kubectl get cpol",
		"charter running: admission at https://127.0.0.1:",
		"metrics at http://127.0.0.1:",
		"PolicyRepository charter/charter-dev Ready",
		"examples/pods/compliant.yaml   # passes every policy",
		"examples/cleanup/ttl-configmap.yaml  # cleanup.kyverno.io/ttl: 20s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
	if !revisionLine.MatchString(out) {
		t.Errorf("output does not name the applied revision:\n%s", out)
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("colour escapes written to a non-terminal:\n%q", out)
	}

	// Metrics are on by default, at the address the banner prints.
	if m := metricsLine.FindStringSubmatch(out); m == nil {
		t.Errorf("no metrics address in the output:\n%s", out)
	} else if body := httpGet(t, m[1]); !strings.Contains(body, "kyverno_") {
		t.Errorf("%s serves no kyverno_ metrics:\n%.500s", m[1], body)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl := devTestClient(t, cfg)
	var policies kyvernov1.ClusterPolicyList
	if err := cl.List(ctx, &policies); err != nil {
		t.Fatal(err)
	}
	if len(policies.Items) == 0 {
		t.Errorf("no ClusterPolicy applied from environments/dev")
	}
	for _, p := range policies.Items {
		if p.Labels["charter.dev/environment"] != "dev" {
			t.Errorf("ClusterPolicy %s lacks the dev environment's label: %v", p.Name, p.Labels)
		}
	}
	// The admission webhooks are registered by URL: dev audits, so a
	// privileged Pod is admitted, with the policies' warnings.
	if err := waitForWebhook(ctx, cl); err != nil {
		t.Fatal(err)
	}
	// The background controller runs the library's generate policy: a
	// namespace created by hand gets its default-deny NetworkPolicy.
	byHand := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "by-hand"}}
	if err := cl.Create(ctx, byHand); err != nil {
		t.Fatal(err)
	}
	// A minute, not seconds: on a loaded 2-core CI machine the admission
	// leader's UpdateRequest and the background leader's first sync have
	// been seen to take over 30 s.
	deadline := time.Now().Add(time.Minute)
	for {
		var np networkingv1.NetworkPolicy
		err := cl.Get(ctx, client.ObjectKey{Namespace: "by-hand", Name: "default-deny"}, &np)
		if err == nil && np.Labels["generate.kyverno.io/policy-name"] == "default-deny-networkpolicy" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace by-hand has no default-deny NetworkPolicy from policy default-deny-networkpolicy after a minute (err %v, labels %v)\n%s\ncharter dev's output:\n%s",
				err, np.Labels, describeUpdateRequests(ctx, cl), out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The cleanup controller runs too: a TTL-labelled ConfigMap goes.
	scratch := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "scratch",
		Labels: map[string]string{"cleanup.kyverno.io/ttl": "1s"}}}
	if err := cl.Create(ctx, scratch); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		err := cl.Get(ctx, client.ObjectKeyFromObject(scratch), &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ConfigMap labelled cleanup.kyverno.io/ttl: 1s is still there after 20 s (%v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	err, out = interrupt()
	if err != nil {
		t.Fatalf("charter dev returned %v after the interrupt:\n%s", err, out)
	}
	if !strings.Contains(out, "✓ stopped") {
		t.Errorf("output does not say the control plane stopped:\n%s", out)
	}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
		t.Error("the control plane still answers after charter dev stopped")
	}
}

func TestDevWithKubeconfigLeavesTheClusterRunning(t *testing.T) {
	ctx := context.Background()
	cp, err := controlplane.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	repo := newPolicyRepo(t, map[string]string{"policies/require-team.yaml": requireTeamPolicy("Enforce")})

	out, interrupt := startDev(t, "dev", "--kubeconfig", cp.KubeconfigPath(), "--crds", crdDir(t), "--repo", repo.dir, "--path", "policies")
	if !strings.Contains(out, "using the cluster at "+cp.RESTConfig().Host) {
		t.Errorf("output does not name the cluster in use:\n%s", out)
	}
	cl := devTestClient(t, cp.RESTConfig())
	if err := waitForWebhook(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if err, out := interrupt(); err != nil {
		t.Fatalf("charter dev returned %v:\n%s", err, out)
	}
	crds := apiextensionsclient.NewForConfigOrDie(cp.RESTConfig()).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Get(ctx, "policyreports.wgpolicyk8s.io", metav1.GetOptions{}); err != nil {
		t.Errorf("after charter dev --kubeconfig: policyreports.wgpolicyk8s.io not there (%v); the cluster should still run with the CRDs installed", err)
	}
	// A cluster that outlives dev must keep admitting: no webhook may
	// point at the stopped process.
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := cl.List(ctx, &validating); err != nil {
		t.Fatal(err)
	}
	if len(validating.Items) != 0 {
		t.Errorf("webhook configurations left behind after charter dev stopped: %d", len(validating.Items))
	}
	if err := cl.Create(ctx, teamlessPod("after-dev")); err != nil {
		t.Errorf("the cluster refuses Pods after charter dev stopped: %v", err)
	}
}

func TestDevAppliesACommitWithinSeconds(t *testing.T) {
	repo := newPolicyRepo(t, map[string]string{"policies/require-team.yaml": requireTeamPolicy("Audit")})
	live, _ := startDevLive(t, "dev", "--crds", crdDir(t), "--repo", repo.dir, "--path", "policies")
	out := live.String()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigLine.FindStringSubmatch(out)[1])
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl := devTestClient(t, cfg)
	if err := waitForWebhook(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, teamlessPod("audited")); err != nil {
		t.Fatalf("an Audit policy refused a Pod: %v", err)
	}

	// Switch the policy to Enforce in a commit: dev sees the branch move
	// and the cluster enforces within seconds.
	repo.commit(t, "enforce require-team", map[string]string{"policies/require-team.yaml": requireTeamPolicy("Enforce")})
	committed := time.Now()
	deadline := committed.Add(30 * time.Second)
	for {
		err := cl.Create(ctx, teamlessPod(fmt.Sprintf("probe-%d", time.Now().UnixNano())), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "require-team") {
			t.Logf("commit enforced %s after it was made", time.Since(committed).Round(100*time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the commit was not enforced within 30s (last create: %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The console says what became of each commit: the revision applied,
	// or why it stalled.
	head := func() string {
		ref, err := repo.repo.Head()
		if err != nil {
			t.Fatal(err)
		}
		return ref.Hash().String()
	}
	enforced := head()
	waitForOutput(t, live, "✓ commit "+shortRevision(enforced)+": master@sha1:"+enforced+" applied", 30*time.Second)
	repo.commit(t, "a broken file", map[string]string{"policies/broken.yaml": "kind: ClusterPolicy\nmetadata: [\n"})
	broken := head()
	waitForOutput(t, live, "✗ commit "+shortRevision(broken)+": stalled: ", 30*time.Second)
	if line := lineWith(live.String(), "✗ commit "+shortRevision(broken)); !strings.Contains(line, "broken.yaml") {
		t.Errorf("the stalled line does not name the file: %q", line)
	}
}

// lineWith returns the first line of s that holds sub.
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
