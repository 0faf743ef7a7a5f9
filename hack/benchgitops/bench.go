package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

const (
	// podNamespace is where the probe Pods are dry-run and what the
	// benchmark's policies match.
	podNamespace = "bench-gitops"
	// receiverSecret holds the webhook token.
	receiverSecret = "bench-receiver"
	pollEvery      = 20 * time.Millisecond
	roundTimeout   = 60 * time.Second
)

var receiverToken = []byte("bench-receiver-token")

type bench struct {
	client client.Client
	work   string
}

func newBench(cfg *rest.Config, work string) (*bench, error) {
	sch := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(sch))
	utilruntime.Must(gitopsv1alpha1.AddToScheme(sch))
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		return nil, err
	}
	return &bench{client: c, work: work}, nil
}

// prepare creates the namespaces and the receiver Secret.
func (b *bench) prepare(ctx context.Context) error {
	for _, ns := range []string{charterNamespace, podNamespace} {
		if err := b.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	return b.client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: charterNamespace, Name: receiverSecret},
		Data:       map[string][]byte{gitopsv1alpha1.ReceiverTokenKey: receiverToken},
	})
}

// pushToEnforced runs the push rounds against one PolicyRepository that
// polls only hourly, so each new commit arrives through the receiver.
func (b *bench) pushToEnforced(ctx context.Context, proc *charterProcess, runs int) ([]pushRound, error) {
	repo, err := newGitRepo(filepath.Join(b.work, "push"))
	if err != nil {
		return nil, err
	}
	// An Audit Pod policy first, so the first round, like every later one,
	// adds a policy to a cluster charter already guards.
	rev, err := repo.commit("baseline", map[string]string{"policies/baseline.yaml": labelPolicy("bench-baseline", "bench-baseline", "Audit")})
	if err != nil {
		return nil, err
	}
	pr := policyRepository("push", repo.dir, "policies", time.Hour)
	if err := b.client.Create(ctx, pr); err != nil {
		return nil, err
	}
	if _, err := b.waitReady(ctx, pr, rev, 2*time.Minute); err != nil {
		return nil, err
	}

	var rounds []pushRound
	for i := range runs {
		name := fmt.Sprintf("bench-enforce-%d", i)
		rev, err := repo.commit("add "+name, map[string]string{"policies/" + name + ".yaml": labelPolicy(name, name, "Enforce")})
		if err != nil {
			return nil, err
		}
		r, err := b.pushRound(ctx, proc, pr, rev, name, func(ctx context.Context) error { return callReceiver(ctx, proc.receiver, pr) })
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", i+1, err)
		}
		fmt.Printf("  push %d: repository Ready after %s, policy Ready after %s, enforced after %s\n", i+1, ms(r.ready), ms(r.policyReady), ms(r.enforced))
		rounds = append(rounds, r)
	}
	return rounds, nil
}

// pushRound runs trigger (the receiver call, or the push and the
// registry's webhook) and times from its start, in parallel, the
// repository turning Ready at rev and charter refusing a Pod for policy.
func (b *bench) pushRound(ctx context.Context, proc *charterProcess, pr *gitopsv1alpha1.PolicyRepository, rev, policy string, trigger func(context.Context) error) (pushRound, error) {
	ctx, cancel := context.WithTimeout(ctx, roundTimeout)
	defer cancel()
	start := time.Now()
	if err := trigger(ctx); err != nil {
		return pushRound{}, err
	}
	var (
		wg                             sync.WaitGroup
		round                          pushRound
		readyErr, refuseErr, policyErr error
	)
	wg.Go(func() {
		_, readyErr = b.waitReady(ctx, pr, rev, roundTimeout)
		round.ready = time.Since(start)
	})
	wg.Go(func() {
		refuseErr = b.waitRefused(ctx, policy)
		round.enforced = time.Since(start)
	})
	wg.Go(func() {
		policyErr = b.waitPolicyReady(ctx, policy)
		round.policyReady = time.Since(start)
	})
	wg.Wait()
	if err := proc.alive(); err != nil {
		return round, err
	}
	if readyErr != nil {
		return round, readyErr
	}
	if policyErr != nil {
		return round, policyErr
	}
	return round, refuseErr
}

// waitPolicyReady polls the ClusterPolicy until charter's admission
// controller reports it served: Ready at its generation.
func (b *bench) waitPolicyReady(ctx context.Context, name string) error {
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(schema.GroupVersionKind{Group: "kyverno.io", Version: "v1", Kind: "ClusterPolicy"})
	for {
		if err := b.client.Get(ctx, client.ObjectKey{Name: name}, p); err == nil && policyReady(p) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ClusterPolicy %s not Ready: %v", name, p.Object["status"])
		case <-time.After(pollEvery):
		}
	}
}

func policyReady(p *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		gen, _, _ := unstructured.NestedInt64(m, "observedGeneration")
		if m["type"] == "Ready" && m["status"] == "True" && gen == p.GetGeneration() {
			return true
		}
	}
	return false
}

// waitRefused dry-runs an unlabelled Pod until charter refuses it naming
// policy.
func (b *bench) waitRefused(ctx context.Context, policy string) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: podNamespace, Name: "probe"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
	}
	var last error
	for {
		err := b.client.Create(ctx, pod.DeepCopy(), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "denied the request") && strings.Contains(err.Error(), policy+":") {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("no Pod refused for %s: last answer %v", policy, last)
		case <-time.After(pollEvery):
		}
	}
}

// waitReady polls pr until it is Ready at rev and returns it. A Stalled
// repository fails at once with its message.
func (b *bench) waitReady(ctx context.Context, pr *gitopsv1alpha1.PolicyRepository, rev string, timeout time.Duration) (*gitopsv1alpha1.PolicyRepository, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	got := &gitopsv1alpha1.PolicyRepository{}
	for {
		if err := b.client.Get(ctx, client.ObjectKeyFromObject(pr), got); err == nil {
			ready := conditionOf(got, gitopsv1alpha1.ConditionReady)
			if got.Status.LastAppliedRevision == rev && ready != nil && ready.Status == metav1.ConditionTrue {
				return got, nil
			}
			if s := conditionOf(got, gitopsv1alpha1.ConditionStalled); s != nil && s.Status == metav1.ConditionTrue && got.Status.LastAttemptedRevision == rev {
				return nil, fmt.Errorf("PolicyRepository %s stalled: %s", pr.Name, s.Message)
			}
		}
		select {
		case <-ctx.Done():
			msg := "no status"
			if c := conditionOf(got, gitopsv1alpha1.ConditionReady); c != nil {
				msg = c.Reason + ": " + c.Message
			}
			return nil, fmt.Errorf("PolicyRepository %s not Ready at %s after %s (%s)", pr.Name, rev, timeout, msg)
		case <-time.After(pollEvery):
		}
	}
}

// largeSync commits n policies and times their sync from the creation of
// the PolicyRepository, sampling charter's memory all along.
func (b *bench) largeSync(ctx context.Context, proc *charterProcess, n int) (largeResult, error) {
	repo, err := newGitRepo(filepath.Join(b.work, "large"))
	if err != nil {
		return largeResult{}, err
	}
	files := make(map[string]string, n)
	for i := range n {
		name := fmt.Sprintf("bench-gen-%03d", i)
		files[fmt.Sprintf("policies/%s/%s.yaml", name, name)] = generatedPolicy(name, i)
	}
	rev, err := repo.commit(fmt.Sprintf("%d policies", n), files)
	if err != nil {
		return largeResult{}, err
	}
	var res largeResult
	if res.rssBefore, _, err = proc.memory(); err != nil {
		return res, err
	}
	sampler := proc.sampleRSS(10 * time.Millisecond)
	pr := policyRepository("large", repo.dir, "policies", time.Hour)
	pr.Spec.Timeout = &metav1.Duration{Duration: 2 * time.Minute}
	start := time.Now()
	if err := b.client.Create(ctx, pr); err != nil {
		sampler.stop()
		return res, err
	}
	got, err := b.waitReady(ctx, pr, rev, 3*time.Minute)
	res.ready = time.Since(start)
	res.rssPeak = sampler.stop()
	if err != nil {
		return res, err
	}
	if len(got.Status.Inventory.Entries) != n {
		return res, fmt.Errorf("inventory holds %d objects, want %d", len(got.Status.Inventory.Entries), n)
	}
	if _, res.hwm, err = proc.memory(); err != nil {
		return res, err
	}
	fmt.Printf("  %d policies: Ready after %s\n", n, ms(res.ready))
	return res, proc.alive()
}

func policyRepository(name, dir, path string, interval time.Duration) *gitopsv1alpha1.PolicyRepository {
	return &gitopsv1alpha1.PolicyRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: charterNamespace, Name: name},
		Spec: gitopsv1alpha1.PolicyRepositorySpec{
			URL:      "file://" + dir,
			Ref:      &gitopsv1alpha1.GitRef{Branch: "main"},
			Path:     path,
			Interval: &metav1.Duration{Duration: interval},
			Receiver: &gitopsv1alpha1.Receiver{SecretRef: corev1.LocalObjectReference{Name: receiverSecret}},
		},
	}
}

// callReceiver posts a GitHub-style push, signed with the token.
func callReceiver(ctx context.Context, base string, pr *gitopsv1alpha1.PolicyRepository) error {
	body := []byte(`{"ref":"refs/heads/main"}`)
	mac := hmac.New(sha256.New, receiverToken)
	mac.Write(body)
	url := base + "/hooks/" + pr.Namespace + "/" + pr.Name
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("receiver %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("receiver %s: %s: %s", url, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

func conditionOf(pr *gitopsv1alpha1.PolicyRepository, typ string) *metav1.Condition {
	for i := range pr.Status.Conditions {
		if pr.Status.Conditions[i].Type == typ {
			return &pr.Status.Conditions[i]
		}
	}
	return nil
}

// gitRepo is a repository on disk the benchmark commits to on main.
type gitRepo struct {
	dir  string
	repo *git.Repository
}

func newGitRepo(dir string) (*gitRepo, error) {
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		return nil, err
	}
	return &gitRepo{dir: dir, repo: r}, nil
}

// commit writes files (path → content) and returns the revision the
// reconciler reports, "main@sha1:<hash>".
func (g *gitRepo) commit(msg string, files map[string]string) (string, error) {
	wt, err := g.repo.Worktree()
	if err != nil {
		return "", err
	}
	for name, content := range files {
		p := filepath.Join(g.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	if err := wt.AddGlob("."); err != nil {
		return "", err
	}
	hash, err := wt.Commit(msg, &git.CommitOptions{
		Author: &object.Signature{Name: "bench", Email: "bench@example.com", When: time.Now()},
	})
	if err != nil {
		return "", err
	}
	return "main@sha1:" + hash.String(), nil
}

// labelPolicy requires label on the Pods of podNamespace.
func labelPolicy(name, label, action string) string {
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: %s
spec:
  background: false
  rules:
  - name: require-label
    match:
      any:
      - resources:
          kinds: [Pod]
          namespaces: [%s]
    validate:
      failureAction: %s
      message: "label %s is required"
      pattern:
        metadata:
          labels:
            %s: "?*"
`, name, podNamespace, action, quote(label), label)
}

// generatedPolicy is one of the large repository's policies: Audit, two
// rules (a pattern with anchors and a deny with a JMESPath condition),
// matching a namespace no Pod is created in.
func generatedPolicy(name string, i int) string {
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: %[1]s
  annotations:
    policies.kyverno.io/title: Generated policy %[2]d
    policies.kyverno.io/description: >-
      One of the benchmark's generated policies; it checks a label and the
      images of a Pod's containers.
spec:
  background: false
  validationFailureAction: Audit
  rules:
  - name: require-label-%[2]d
    match:
      any:
      - resources:
          kinds: [Pod]
          namespaces: [bench-large]
    validate:
      message: "label bench-%[2]d is required"
      pattern:
        metadata:
          labels:
            bench-%[2]d: "?*"
        spec:
          containers:
          - =(imagePullPolicy): "Always | IfNotPresent"
  - name: deny-latest-%[2]d
    match:
      any:
      - resources:
          kinds: [Pod]
          namespaces: [bench-large]
    validate:
      message: "images of bench-%[2]d must not use :latest"
      deny:
        conditions:
          any:
          - key: "{{ request.object.spec.containers[].image || `+"`[]`"+` }}"
            operator: AnyIn
            value: ["*:latest"]
`, name, i)
}
