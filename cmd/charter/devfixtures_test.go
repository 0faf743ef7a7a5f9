package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/webhook/config"
)

// policyRepo is a Git repository in a temporary folder that tests commit
// policies to.
type policyRepo struct {
	dir  string
	repo *git.Repository
}

func newPolicyRepo(t *testing.T, files map[string]string) *policyRepo {
	t.Helper()
	dir := t.TempDir()
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	repo := &policyRepo{dir: dir, repo: r}
	repo.commit(t, "first policies", files)
	return repo
}

// commit writes files (path → content) and commits them on the current
// branch.
func (r *policyRepo) commit(t *testing.T, message string, files map[string]string) {
	t.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		path := filepath.Join(r.dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			t.Fatal(err)
		}
	}
	sig := &object.Signature{Name: "charter tests", Email: "tests@charter.dev", When: time.Now()}
	if _, err := wt.Commit(message, &git.CommitOptions{Author: sig}); err != nil {
		t.Fatal(err)
	}
}

// requireTeamPolicy requires a team label on Pods, with the given action.
func requireTeamPolicy(action string) string {
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: require-team
spec:
  background: false
  rules:
  - name: check-team
    match:
      any:
      - resources:
          kinds: [Pod]
    validate:
      failureAction: %s
      message: "label 'team' is required"
      pattern:
        metadata:
          labels:
            team: "?*"
`, action)
}

func teamlessPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/app:1.0"}}},
	}
}

func devTestClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	sch, err := serveScheme()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// waitForWebhook waits until charter's resource validating webhook
// configuration is in place.
func waitForWebhook(ctx context.Context, cl client.Client) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var cfg admissionregistrationv1.ValidatingWebhookConfiguration
		err := cl.Get(ctx, client.ObjectKey{Name: config.ResourceValidatingName}, &cfg)
		if err == nil && len(cfg.Webhooks) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s with webhooks within a minute (last: %v)", config.ResourceValidatingName, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// describeUpdateRequests lists the UpdateRequests in the cluster with their
// state, for a failure message that says whether admission asked for the
// background work and what became of it.
func describeUpdateRequests(ctx context.Context, cl client.Client) string {
	var urs kyvernov2.UpdateRequestList
	if err := cl.List(ctx, &urs); err != nil {
		return fmt.Sprintf("UpdateRequests: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d UpdateRequests:", len(urs.Items))
	for _, ur := range urs.Items {
		fmt.Fprintf(&b, "\n  %s/%s %s policy=%s trigger=%s/%s/%s state=%s %s", ur.Namespace, ur.Name, ur.Spec.Type, ur.Spec.Policy,
			ur.Spec.Resource.Kind, ur.Spec.Resource.Namespace, ur.Spec.Resource.Name, ur.Status.State, ur.Status.Message)
	}
	return b.String()
}
