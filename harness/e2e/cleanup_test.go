package e2e

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

const (
	cleanupNamespaceA       = "e2e-cleanup-a"
	cleanupNamespaceB       = "e2e-cleanup-b"
	cleanupNamespaceOther   = "e2e-cleanup-other"
	cleanupCharterNamespace = "charter-cleanup"
	ttlLabel                = "cleanup.kyverno.io/ttl"
)

// The cleanup specs run `charter serve --controllers=admission,cleanup`.
// The three scheduled policies are created first, so the minute their
// schedule waits for is spent once, while the TTL and admission specs run.
var _ = Describe("Cleanup", Label("cleanup"), Ordered, func() {
	var (
		cl        client.Client
		stop      func(context.Context)
		policyAt  time.Time
		kept      []client.Object
		purged    []client.Object
		rehearsed *corev1.ConfigMap
	)

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		for _, ns := range []string{cleanupCharterNamespace, cleanupNamespaceA, cleanupNamespaceB, cleanupNamespaceOther} {
			Expect(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		}
		// own-namespace.yaml, a CleanupPolicy of e2e-cleanup-a, deletes
		// as that namespace's charter-policy, which its owner lets delete
		// its ConfigMaps.
		grantPolicyServiceAccount(ctx, cleanupNamespaceA, rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "delete"}})
		// charter runs on this machine whatever the cluster: the specs
		// stop it and start it again (a restart).
		stop = startCharterWith(ctx, cleanupCharterNamespace, "admission,cleanup")
		waitPolicyWebhook(ctx)

		purged = []client.Object{
			cleanupConfigMap(cleanupNamespaceA, "purge-a", map[string]string{"e2e-cleanup": "purge"}),
			cleanupConfigMap(cleanupNamespaceB, "purge-b", map[string]string{"e2e-cleanup": "purge", "size": "small"}),
			cleanupConfigMap(cleanupNamespaceA, "own-a", map[string]string{"e2e-cleanup": "own"}),
		}
		rehearsed = cleanupConfigMap(cleanupNamespaceB, "rehearse", map[string]string{"e2e-cleanup": "rehearse"})
		kept = []client.Object{
			cleanupConfigMap(cleanupNamespaceA, "other-label", map[string]string{"e2e-cleanup": "keep"}),
			cleanupConfigMap(cleanupNamespaceOther, "other-namespace", map[string]string{"e2e-cleanup": "purge"}),
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cleanupNamespaceA, Name: "excluded-kind", Labels: map[string]string{"e2e-cleanup": "purge"}}},
			cleanupConfigMap(cleanupNamespaceB, "false-condition", map[string]string{"e2e-cleanup": "purge", "size": "huge"}),
			cleanupConfigMap(cleanupNamespaceB, "own-b", map[string]string{"e2e-cleanup": "own"}),
			cleanupConfigMap(cleanupCharterNamespace, "charter-own", map[string]string{"e2e-cleanup": "own"}),
			rehearsed,
		}
		for _, obj := range append(append([]client.Object{}, purged...), kept...) {
			Expect(cl.Create(ctx, obj)).To(Succeed())
		}
		policyAt = time.Now()
		for _, file := range []string{"purge-every-minute.yaml", "own-namespace.yaml", "dry-run.yaml"} {
			p := cleanupPolicy(file)
			Expect(cl.Create(ctx, p)).To(Succeed(), file)
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, p))).To(Succeed()) })
		}
	}, NodeTimeout(2*time.Minute))

	It("refuses a TTL label it cannot read, naming the accepted forms", func(ctx SpecContext) {
		err := cl.Create(ctx, cleanupConfigMap(cleanupNamespaceA, "bad-ttl", map[string]string{ttlLabel: "10ay"}))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`cleanup.kyverno.io/ttl "10ay" is not a duration (e.g. 30s, 1h30m, 2d, 1w)`))
	}, SpecTimeout(30*time.Second))

	It("refuses a cleanup policy whose schedule cannot be parsed, with the field path", func(ctx SpecContext) {
		p := cleanupPolicy("purge-every-minute.yaml")
		p.SetName("e2e-bad-schedule")
		p.(*kyvernov2.ClusterCleanupPolicy).Spec.Schedule = "61 * * * *"
		err := cl.Create(ctx, p)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`ClusterCleanupPolicy "e2e-bad-schedule": spec.schedule: invalid schedule "61 * * * *"`))
	}, SpecTimeout(30*time.Second))

	It("refuses a namespaced CleanupPolicy that names another namespace", func(ctx SpecContext) {
		p := cleanupPolicy("own-namespace.yaml").(*kyvernov2.CleanupPolicy)
		p.Name = "e2e-reach-out"
		p.Spec.MatchResources.Any[0].ResourceDescription.Namespaces = []string{cleanupNamespaceB}
		err := cl.Create(ctx, p)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.match.any[0].resources.namespaces: a namespaced CleanupPolicy acts only in its own namespace"))
	}, SpecTimeout(30*time.Second))

	It("deletes an object within seconds of its TTL deadline", func(ctx SpecContext) {
		cm := cleanupConfigMap(cleanupNamespaceB, "ttl", map[string]string{ttlLabel: "5s"})
		Expect(cl.Create(ctx, cm)).To(Succeed())
		deadline := cm.CreationTimestamp.Add(5 * time.Second)
		Eventually(func() error { return cl.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}) }).
			WithTimeout(20 * time.Second).WithPolling(100 * time.Millisecond).Should(Satisfy(apierrors.IsNotFound))
		gone := time.Now()
		// creationTimestamp has whole seconds: the deadline is at most a
		// second earlier than five seconds after the create.
		Expect(gone).To(BeTemporally(">=", deadline.Add(-time.Second)), "deleted before its deadline")
		Expect(gone).To(BeTemporally("<=", deadline.Add(3*time.Second)), "deleted %s after its deadline", gone.Sub(deadline))
	}, SpecTimeout(30*time.Second))

	It("deletes exactly the matched objects on a schedule of every minute", func(ctx SpecContext) {
		// The first run is at the first minute after the policies were
		// created.
		firstRun := policyAt.Truncate(time.Minute).Add(time.Minute)
		for _, obj := range purged {
			Eventually(func() error {
				return cl.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
			}).
				WithTimeout(time.Until(firstRun)+20*time.Second).WithPolling(250*time.Millisecond).
				Should(Satisfy(apierrors.IsNotFound), "%s/%s not deleted", obj.GetNamespace(), obj.GetName())
		}
		Eventually(func(g Gomega) {
			var p kyvernov2.ClusterCleanupPolicy
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: "e2e-purge"}, &p)).To(Succeed())
			g.Expect(p.Status.LastExecutionTime).NotTo(BeNil())
			g.Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", "Ready"), HaveField("Status", metav1.ConditionTrue),
				HaveField("Message", ContainSubstring("deleted 2 objects")))))
			var dry kyvernov2.ClusterCleanupPolicy
			g.Expect(cl.Get(ctx, client.ObjectKey{Name: "e2e-dry-run"}, &dry)).To(Succeed())
			g.Expect(dry.Status.Conditions).To(ContainElement(And(HaveField("Type", "Ready"),
				HaveField("Message", ContainSubstring("dry run: would have deleted 1 objects")))))
		}).WithTimeout(20 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		for _, obj := range kept {
			Expect(cl.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))).To(Succeed(),
				"%s/%s is outside every policy's match and must stay", obj.GetNamespace(), obj.GetName())
		}
		Eventually(func(g Gomega) {
			events, err := suite.kube.EventsV1().Events("").List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(events.Items).To(ContainElement(And(HaveField("Reason", "PolicyApplied"), HaveField("ReportingController", "kyverno-cleanup"),
				HaveField("Note", "successfully cleaned up the target resource ConfigMap/"+cleanupNamespaceA+"/purge-a"))))
			g.Expect(events.Items).To(ContainElement(And(HaveField("Reason", "DryRun"),
				HaveField("Note", "dry run: would clean up the target resource ConfigMap/"+cleanupNamespaceB+"/rehearse"))))
		}).WithTimeout(20 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("loses no TTL deadline across a restart of the controller", func(ctx SpecContext) {
		stop(ctx)
		cm := cleanupConfigMap(cleanupNamespaceA, "ttl-restart", map[string]string{ttlLabel: "2s"})
		Expect(cl.Create(ctx, cm)).To(Succeed())
		Consistently(func() error { return cl.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}) }).
			WithTimeout(3*time.Second).Should(Succeed(), "deleted while no controller ran")
		startCharterWith(ctx, cleanupCharterNamespace, "admission,cleanup")
		Eventually(func() error { return cl.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}) }).
			WithTimeout(20 * time.Second).WithPolling(100 * time.Millisecond).Should(Satisfy(apierrors.IsNotFound))
	}, SpecTimeout(2*time.Minute))
})

func cleanupConfigMap(ns, name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

// cleanupPolicy reads a CleanupPolicy or ClusterCleanupPolicy of
// testdata/cleanup.
func cleanupPolicy(file string) client.Object {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join("testdata", "cleanup", file))
	Expect(err).NotTo(HaveOccurred())
	var probe metav1.TypeMeta
	Expect(yaml.Unmarshal(data, &probe)).To(Succeed())
	var p client.Object = &kyvernov2.ClusterCleanupPolicy{}
	if probe.Kind == kyvernov2.CleanupPolicyKind {
		p = &kyvernov2.CleanupPolicy{}
	}
	Expect(yaml.UnmarshalStrict(data, p)).To(Succeed())
	return p
}
