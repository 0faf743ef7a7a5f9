package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/reconciler/reports"
)

// devSource is the Git checkout and branch `charter dev` syncs.
type devSource struct {
	dir string // the checkout's top folder
	// gitDir is the repository gitsync fetches: dir itself, or for a
	// linked worktree (`git worktree add`) the main repository's Git
	// folder, which holds the branches of every worktree.
	gitDir string
	branch string
	path   string
}

// url is the checkout as gitsync fetches it: committed content only, so
// what reaches the cluster is what a push would deliver.
func (s devSource) url() string {
	if s.gitDir != "" {
		return "file://" + filepath.ToSlash(s.gitDir)
	}
	return "file://" + filepath.ToSlash(s.dir)
}

// openCheckout opens the Git checkout at or above dir, a linked worktree
// included: its .git is a file naming a folder whose objects and refs live
// in the main repository (go-git reads them only when asked to).
func openCheckout(dir string) (*git.Repository, error) {
	return git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
}

// commonGitDir is the main repository's Git folder when root is a linked
// worktree ("gitdir: <main>/.git/worktrees/<name>" in root/.git, and
// "commondir" there pointing back at <main>/.git), else "".
func commonGitDir(root string) (string, error) {
	dotGit := filepath.Join(root, ".git")
	fi, err := os.Stat(dotGit)
	if err != nil || fi.IsDir() {
		return "", nil
	}
	data, err := os.ReadFile(dotGit)
	if err != nil {
		return "", err
	}
	gitDir, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
	if !ok {
		return "", fmt.Errorf("%s: not a gitdir file", dotGit)
	}
	gitDir = strings.TrimSpace(gitDir)
	if !filepath.IsAbs(gitDir) {
		gitDir = filepath.Join(root, gitDir)
	}
	common, err := os.ReadFile(filepath.Join(gitDir, "commondir"))
	if err != nil {
		// A submodule's .git file has no commondir: its gitdir is the
		// repository.
		return filepath.Clean(gitDir), nil
	}
	c := strings.TrimSpace(string(common))
	if !filepath.IsAbs(c) {
		c = filepath.Join(gitDir, c)
	}
	return filepath.Clean(c), nil
}

// resolveDevSource finds the checkout to sync and its branch, and checks
// the path is there before anything starts.
func resolveDevSource(opts devOptions) (devSource, error) {
	dir := opts.repo
	if dir == "" {
		root, err := controlplane.ModuleRoot()
		if err != nil {
			return devSource{}, fmt.Errorf("finding this checkout (pass --repo): %w", err)
		}
		dir = root
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return devSource{}, err
	}
	repo, err := openCheckout(dir)
	if err != nil {
		return devSource{}, fmt.Errorf("--repo %s: not a Git checkout: %w", dir, err)
	}
	if wt, err := repo.Worktree(); err == nil {
		dir = wt.Filesystem.Root()
	}
	branch := opts.branch
	if branch == "" {
		head, err := repo.Head()
		if err != nil {
			return devSource{}, fmt.Errorf("--repo %s: reading HEAD: %w", dir, err)
		}
		if !head.Name().IsBranch() {
			return devSource{}, fmt.Errorf("--repo %s: HEAD is detached at %s; check out a branch or pass --branch", dir, head.Hash().String()[:12])
		}
		branch = head.Name().Short()
	}
	if _, err := repo.Reference(plumbing.NewBranchReferenceName(branch), true); err != nil {
		return devSource{}, fmt.Errorf("--repo %s: branch %q: %w", dir, branch, err)
	}
	path := filepath.ToSlash(filepath.Clean(opts.path))
	if _, err := os.Stat(filepath.Join(dir, path)); err != nil {
		return devSource{}, fmt.Errorf("--path %s: not in %s: %w", opts.path, dir, err)
	}
	gitDir, err := commonGitDir(dir)
	if err != nil {
		return devSource{}, fmt.Errorf("--repo %s: %w", dir, err)
	}
	return devSource{dir: dir, gitDir: gitDir, branch: branch, path: path}, nil
}

// syncRepository points the dev PolicyRepository at source and waits for
// the first sync. A revision that does not apply is reported, not fatal:
// dev keeps running so the next commit can fix it.
func (e *devEnvironment) syncRepository(ctx context.Context, source devSource, timeout time.Duration) error {
	started := time.Now()
	prune := true
	want := gitopsv1alpha1.PolicyRepositorySpec{
		URL:  source.url(),
		Ref:  &gitopsv1alpha1.GitRef{Branch: source.branch},
		Path: source.path,
		// dev asks for a sync on every commit; the interval is the net
		// under that.
		Interval: &metav1.Duration{Duration: time.Minute},
		Prune:    &prune,
	}
	repo := &gitopsv1alpha1.PolicyRepository{ObjectMeta: metav1.ObjectMeta{Namespace: devNamespace, Name: devRepositoryName}}
	err := e.client.Get(ctx, client.ObjectKeyFromObject(repo), repo)
	switch {
	case apierrors.IsNotFound(err):
		repo.Spec = want
		if err := e.client.Create(ctx, repo); err != nil {
			return fmt.Errorf("creating PolicyRepository %s/%s: %w", devNamespace, devRepositoryName, err)
		}
	case err != nil:
		return fmt.Errorf("reading PolicyRepository %s/%s: %w", devNamespace, devRepositoryName, err)
	default:
		repo.Spec = want
		if err := e.client.Update(ctx, repo); err != nil {
			return fmt.Errorf("updating PolicyRepository %s/%s: %w", devNamespace, devRepositoryName, err)
		}
		if err := requestSync(ctx, e.client, client.ObjectKeyFromObject(repo)); err != nil {
			return err
		}
	}

	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if err := e.client.Get(waitCtx, client.ObjectKeyFromObject(repo), repo); err == nil && repo.Status.ObservedGeneration == repo.Generation {
			if c := apimeta.FindStatusCondition(repo.Status.Conditions, gitopsv1alpha1.ConditionReady); c != nil && c.ObservedGeneration == repo.Generation {
				switch {
				case c.Status == metav1.ConditionTrue:
					objects := 0
					if repo.Status.Inventory != nil {
						objects = len(repo.Status.Inventory.Entries)
					}
					e.done("PolicyRepository %s/%s Ready in %s: %s applied (%d objects from %s)", devNamespace, devRepositoryName,
						time.Since(started).Round(100*time.Millisecond), repo.Status.LastAppliedRevision, objects, source.path)
					return nil
				case apimeta.IsStatusConditionTrue(repo.Status.Conditions, gitopsv1alpha1.ConditionStalled):
					e.fail("PolicyRepository %s/%s: %s: %s", devNamespace, devRepositoryName, c.Reason, c.Message)
					return nil
				}
			}
		}
		select {
		case <-waitCtx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			msg := "no Ready condition yet"
			if c := apimeta.FindStatusCondition(repo.Status.Conditions, gitopsv1alpha1.ConditionReady); c != nil {
				msg = c.Reason + ": " + c.Message
			}
			e.fail("PolicyRepository %s/%s not Ready within %s (%s)", devNamespace, devRepositoryName, timeout, msg)
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// requestSync sets the reconcile-request annotation, which makes gitsync
// sync at once, as a push receiver call would.
func requestSync(ctx context.Context, cl client.Client, key client.ObjectKey) error {
	repo := &gitopsv1alpha1.PolicyRepository{}
	if err := cl.Get(ctx, key, repo); err != nil {
		return err
	}
	patch := client.MergeFrom(repo.DeepCopy())
	if repo.Annotations == nil {
		repo.Annotations = map[string]string{}
	}
	repo.Annotations[gitopsv1alpha1.ReconcileRequestAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
	return cl.Patch(ctx, repo, patch)
}

// branchWatcher follows a branch of a local checkout: a commit moves it.
type branchWatcher struct {
	dir    string
	branch string
}

// run calls moved with the new commit each time the branch moves, until
// ctx ends. Reading one ref file a second is cheap, and unlike a file
// system watch it sees commits made by any tool, packed refs included.
func (w *branchWatcher) run(ctx context.Context, moved func(rev string)) {
	last, _ := w.head()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			rev, err := w.head()
			if err != nil || rev == last {
				continue
			}
			last = rev
			moved(rev)
		}
	}
}

func (w *branchWatcher) head() (string, error) {
	repo, err := openCheckout(w.dir)
	if err != nil {
		return "", err
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName(w.branch), true)
	if err != nil {
		return "", err
	}
	return ref.Hash().String(), nil
}

// syncOutcomeTimeout bounds the wait for the outcome of a commit's sync.
const syncOutcomeTimeout = time.Minute

// syncOutcome waits until the PolicyRepository has applied rev, or stalled
// on it, and says which: the applied revision, or (in red) the reason and
// message of the Stalled condition, which name the file and field at
// fault. A newer commit, the end of ctx or the timeout ends the wait.
func (e *devEnvironment) syncOutcome(ctx context.Context, rev string, timeout time.Duration) {
	started := time.Now()
	short := shortRevision(rev)
	key := client.ObjectKey{Namespace: devNamespace, Name: devRepositoryName}
	deadline := time.After(timeout)
	for {
		var repo gitopsv1alpha1.PolicyRepository
		if err := e.client.Get(ctx, key, &repo); err == nil {
			st := repo.Status
			ready := apimeta.FindStatusCondition(st.Conditions, gitopsv1alpha1.ConditionReady)
			stalled := apimeta.FindStatusCondition(st.Conditions, gitopsv1alpha1.ConditionStalled)
			switch {
			case strings.HasSuffix(st.LastAppliedRevision, rev) && ready != nil && ready.Status == metav1.ConditionTrue:
				objects := 0
				if st.Inventory != nil {
					objects = len(st.Inventory.Entries)
				}
				e.done("commit %s: %s applied in %s (%d objects)", short, st.LastAppliedRevision,
					time.Since(started).Round(100*time.Millisecond), objects)
				return
			case strings.HasSuffix(st.LastAttemptedRevision, rev) && stalled != nil && stalled.Status == metav1.ConditionTrue:
				e.fail("commit %s: stalled: %s: %s", short, stalled.Reason, stalled.Message)
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			e.fail("commit %s: no outcome within %s (kubectl get prepo -n %s %s)", short, timeout, devNamespace, devRepositoryName)
			return
		case <-time.After(200 * time.Millisecond):
		}
		if head, err := e.watcher.head(); err == nil && head != rev {
			e.done("commit %s: superseded by %s", short, shortRevision(head))
			return
		}
	}
}

func shortRevision(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// reportsDevOptions are the reports controller's settings in dev.
func reportsDevOptions(apis []policyreport.API, managedBy string) reports.Options {
	return reports.Options{BackgroundScanInterval: 5 * time.Minute, APIs: apis, ManagedBy: managedBy}
}
