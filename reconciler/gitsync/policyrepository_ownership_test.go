package gitsync

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/reconciler/gitsync/apply"
	"github.com/charter-dev/charter/reconciler/gitsync/inventory"
)

// platformManager is the field manager of what the tests' platform team
// places in a namespace, outside any repository.
const platformManager = "platform-team"

func configMap(ns, name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s}\ndata: {setting: %q}\n", name, ns, value)
}

// placeConfigMap creates a ConfigMap as the platform team.
func placeConfigMap(t *testing.T, ns, name, value string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"setting": value}}
	if err := testClient.Create(context.Background(), cm, client.FieldOwner(platformManager)); err != nil {
		t.Fatal(err)
	}
}

func settingOf(t *testing.T, ns, name string) string {
	t.Helper()
	cm := getNamespaced(t, &corev1.ConfigMap{}, ns, name)
	if cm == nil {
		return "<gone>"
	}
	return cm.Data["setting"]
}

// A repository's revision that sets a field the platform placed with
// another value stalls with reason Conflict, naming the object, the field
// and the platform's manager; nothing of the revision applies. Removing
// the object from the repository then leaves the platform's object alone.
func TestRevisionDoesNotTakeOverAnotherManagersFields(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	placeConfigMap(t, ns, "platform-settings", "platform")
	src := newGitRepo(t)
	first := src.commit(map[string]string{"own.yaml": namespacedPolicy(ns, "own-policy")}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	readyAt(t, repo, first)

	rev := src.commit(map[string]string{
		"settings.yaml": configMap(ns, "platform-settings", "tenant"),
		"second.yaml":   namespacedPolicy(ns, "second-policy"),
	}, nil)
	got := stalledWith(t, repo, rev, gitopsv1alpha1.ReasonConflict)
	msg := condition(got, gitopsv1alpha1.ConditionReady).Message
	g.Expect(msg).To(ContainSubstring("settings.yaml: ConfigMap/" + ns + "/platform-settings: conflict: .data.setting held by field manager \"" + platformManager + "\""))
	g.Expect(msg).To(ContainSubstring("not taken over without spec.force"))
	g.Expect(msg).To(ContainSubstring("charter/" + ns + "/policies"))
	g.Expect(settingOf(t, ns, "platform-settings")).To(Equal("platform"))
	g.Expect(getNamespaced(t, &kyvernov1.Policy{}, ns, "second-policy")).To(BeNil(), "nothing of a conflicting revision applies")
	g.Expect(got.Status.LastAppliedRevision).To(Equal(first))

	fixed := src.commit(map[string]string{"settings.yaml": ""}, nil)
	readyAt(t, repo, fixed)
	g.Expect(settingOf(t, ns, "platform-settings")).To(Equal("platform"))
	g.Expect(getNamespaced(t, &kyvernov1.Policy{}, ns, "second-policy")).NotTo(BeNil())
}

// An object that exists and is not in the repository's inventory is not
// adopted, even when the revision declares the very values it holds: once
// adopted, removing it from the repository would prune it.
func TestRevisionDoesNotAdoptAnExistingObject(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	placeConfigMap(t, ns, "platform-same", "same")
	src := newGitRepo(t)
	rev := src.commit(map[string]string{"settings.yaml": configMap(ns, "platform-same", "same")}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	got := stalledWith(t, repo, rev, gitopsv1alpha1.ReasonConflict)
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Message).To(ContainSubstring(
		"settings.yaml: ConfigMap/" + ns + "/platform-same: exists and is not this repository's (not in its inventory): .data.setting held by field manager \"" + platformManager + "\""))
	cm := getNamespaced(t, &corev1.ConfigMap{}, ns, "platform-same")
	g.Expect(cm.Labels).NotTo(HaveKey(apply.OwnerNameLabel))
	for _, e := range cm.ManagedFields {
		g.Expect(e.Manager).NotTo(HavePrefix("charter"))
	}
}

// spec.force takes over the other manager's fields.
func TestForceTakesOver(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	placeConfigMap(t, ns, "platform-forced", "platform")
	src := newGitRepo(t)
	rev := src.commit(map[string]string{"settings.yaml": configMap(ns, "platform-forced", "tenant")}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) { r.Spec.Force = true })
	readyAt(t, repo, rev)
	g.Expect(settingOf(t, ns, "platform-forced")).To(Equal("tenant"))
}

// An object an older charter applied under the shared field manager
// "charter", listed in the repository's inventory, is updated and then
// pruned by the repository under its own field manager.
func TestLegacyFieldManagerIsTakenOverForInventoriedObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	src := newGitRepo(t)
	src.commit(map[string]string{"settings.yaml": configMap(ns, "legacy", "v1")}, nil)

	// What an older charter left: the object under "charter", labelled
	// with its repository, and listed in the repository's inventory.
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) { r.Spec.Suspend = true })
	legacy := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy", Labels: map[string]string{
			apply.OwnerNameLabel: repo.Name, apply.OwnerNamespaceLabel: ns,
		}},
		Data: map[string]string{"setting": "v0"},
	}
	//nolint:staticcheck // as the older charter applied it.
	g.Expect(testClient.Patch(ctx, legacy, client.Apply, client.FieldOwner(apply.LegacyFieldManager), client.ForceOwnership)).To(Succeed())
	resumeWithInventory(t, repo, "legacy")

	// The commit changes the value "charter" holds: taken over.
	rev := src.commit(map[string]string{"settings.yaml": configMap(ns, "legacy", "v2")}, nil)
	readyAt(t, repo, rev)
	g.Expect(settingOf(t, ns, "legacy")).To(Equal("v2"))

	rev = src.commit(map[string]string{"settings.yaml": "", "other.yaml": configMap(ns, "other", "x")}, nil)
	readyAt(t, repo, rev)
	g.Eventually(func() string { return settingOf(t, ns, "legacy") }).WithTimeout(waitTimeout).Should(Equal("<gone>"))
}

// resumeWithInventory lists ConfigMaps of the repository's namespace in
// its status.inventory, as an earlier sync would have, and resumes it.
func resumeWithInventory(t *testing.T, repo *gitopsv1alpha1.PolicyRepository, names ...string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.ObservedGeneration).To(Equal(r.Generation))
	})
	var objs []*unstructured.Unstructured
	for _, name := range names {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetNamespace(repo.Namespace)
		u.SetName(name)
		objs = append(objs, u)
	}
	// The reconciler writes status too: retry on a conflict.
	g.Eventually(func() error {
		if err := testClient.Get(ctx, client.ObjectKeyFromObject(repo), repo); err != nil {
			return err
		}
		repo.Status.Inventory = inventory.New(objs)
		return testClient.Status().Update(ctx, repo)
	}).WithTimeout(waitTimeout).Should(Succeed())
	g.Eventually(func() error {
		if err := testClient.Get(ctx, client.ObjectKeyFromObject(repo), repo); err != nil {
			return err
		}
		repo.Spec.Suspend = false
		return testClient.Update(ctx, repo)
	}).WithTimeout(waitTimeout).Should(Succeed())
}

// An inventory that lists what the repository never applied (whoever may
// write its status could forge one) takes nothing over: the platform's
// ConfigMap, listed there, conflicts, and leaving the repository it is
// not pruned.
func TestForgedInventoryTakesNothingOver(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	placeConfigMap(t, ns, "platform-listed", "platform")
	src := newGitRepo(t)
	rev := src.commit(map[string]string{"settings.yaml": configMap(ns, "platform-listed", "tenant")}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) { r.Spec.Suspend = true })
	resumeWithInventory(t, repo, "platform-listed")
	got := stalledWith(t, repo, rev, gitopsv1alpha1.ReasonConflict)
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Message).To(ContainSubstring(".data.setting held by field manager \"" + platformManager + "\""))
	g.Expect(settingOf(t, ns, "platform-listed")).To(Equal("platform"))

	rev = src.commit(map[string]string{"settings.yaml": "", "other.yaml": configMap(ns, "tenant-own", "x")}, nil)
	readyAt(t, repo, rev)
	g.Consistently(func() string { return settingOf(t, ns, "platform-listed") }).Should(Equal("platform"))
}

// An object of the inventory that another manager now also holds is not
// pruned when it leaves the repository.
func TestPruneLeavesAnObjectAnotherManagerHolds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	src := newGitRepo(t)
	first := src.commit(map[string]string{"settings.yaml": configMap(ns, "shared", "repo"), "keep.yaml": configMap(ns, "keep", "x")}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	readyAt(t, repo, first)

	// The platform takes the object over.
	taken := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
		Data:       map[string]string{"setting": "platform", "more": "platform"},
	}
	//nolint:staticcheck // an apply as the platform team.
	g.Expect(testClient.Patch(ctx, taken, client.Apply, client.FieldOwner(platformManager), client.ForceOwnership)).To(Succeed())

	rev := src.commit(map[string]string{"settings.yaml": ""}, nil)
	readyAt(t, repo, rev)
	g.Consistently(func() string { return settingOf(t, ns, "shared") }).Should(Equal("platform"))
}
