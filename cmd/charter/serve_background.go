package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/charter-dev/charter/reconciler/background"
	"github.com/charter-dev/charter/webhook/updaterequest"
)

// backgroundOptions are the flags of the background controller and of
// the UpdateRequests admission creates for it.
type backgroundOptions struct {
	// serviceAccount is the background controller's ServiceAccount in
	// charter's namespace (--background-service-account).
	serviceAccount string
	// resyncInterval is --background-resync-interval.
	resyncInterval time.Duration
	// threshold is --update-request-threshold.
	threshold int
}

// check refuses values the controller cannot run with.
func (b *backgroundOptions) check() error {
	if b.resyncInterval <= 0 {
		return fmt.Errorf("--background-resync-interval must be positive, got %s", b.resyncInterval)
	}
	if b.threshold < 0 {
		return fmt.Errorf("--update-request-threshold must be 0 (no limit) or more, got %d", b.threshold)
	}
	return nil
}

func (b *backgroundOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&b.serviceAccount, "background-service-account", "charter-background",
		"ServiceAccount (in --namespace) the background controller runs as: admission ignores its writes for rules with skipBackgroundRequests (the default), so a generated or mutated object never triggers its own rule again. "+
			"When the controller runs in the admission process, that process's own writes with field manager charter-background are ignored too, whatever its identity. "+
			"When it runs in another process, policy admission asks with SubjectAccessReviews whether this ServiceAccount may write what a ClusterPolicy's generate and mutate-existing rules name, and refuses the policy otherwise, as Kyverno does")
	f.DurationVar(&b.resyncInterval, "background-resync-interval", background.DefaultResync,
		"how often the background controller goes over every generate and mutate-existing policy without a new trigger: drifted synchronized objects are restored, generateExisting and mutateExistingOnPolicyUpdate rules run again, triggers of synchronized rules that admission missed are covered, Failed UpdateRequests get one more attempt")
	f.IntVar(&b.threshold, "update-request-threshold", updaterequest.DefaultThreshold,
		"admission creates no UpdateRequest while this many exist in --namespace (Kyverno's updateRequestThreshold); each one not created is a Warning UpdateRequestThresholdReached event on its policy, and synchronized generate rules catch up at the next resync. 0 sets no limit")
}

// updateRequestConfig is the admission side of the background controller:
// whose requests are its own (loop protection). When the controller runs
// in this process, this process's identity is asked of the API server: its
// writes are known by their field manager, since charter dev shares the
// developer's identity.
func (b *backgroundOptions) updateRequestConfig(ctx context.Context, cfg *rest.Config, o serveOptions, log logr.Logger) updaterequest.Config {
	// The namespaced policies' ServiceAccount writes for them in each
	// namespace: its requests are the controller's own for that
	// namespace's namespaced policies only.
	out := updaterequest.Config{Threshold: b.threshold, Own: updaterequest.OwnRequests{NamespacedPolicyServiceAccount: o.policyServiceAccount}}
	if b.serviceAccount != "" {
		out.Own.Users = []string{serviceaccount.MakeUsername(o.namespace, b.serviceAccount)}
	}
	if !slices.Contains(o.controllers, controllerBackground) {
		return out
	}
	user, err := whoAmI(ctx, cfg)
	if err != nil {
		log.Error(err, "finding this process's identity: the background controller's own writes from it are not told apart, so a policy whose generated kind is also its trigger kind may trigger itself")
		return out
	}
	out.Own.SharedUsers = []string{user}
	return out
}

// whoAmI asks the API server who this process is (SelfSubjectReview).
func whoAmI(ctx context.Context, cfg *rest.Config) (string, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("SelfSubjectReview: %w", err)
	}
	return r.Status.UserInfo.Username, nil
}
