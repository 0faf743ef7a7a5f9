package e2e

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/internal/controlplane"
)

var clusterPolicies = schema.GroupVersionResource{Group: "kyverno.io", Version: "v1", Resource: "clusterpolicies"}

var _ = Describe("Foundation", Label("foundation"), func() {
	It("serves every CRD in config/crd/bases", func(ctx SpecContext) {
		want, err := controlplane.ReadCRDs(suite.crdDir)
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, crd := range want {
			names = append(names, crd.Name)
		}
		// The APIs charter's compatibility contract names must be among them.
		Expect(names).To(ContainElements(
			"clusterpolicies.kyverno.io", "policies.kyverno.io", "policyexceptions.kyverno.io",
			"policyreports.wgpolicyk8s.io", "clusterpolicyreports.wgpolicyk8s.io",
			"policyrepositories.gitops.charter.dev",
		))

		for _, name := range names {
			crd, err := suite.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred(), "CRD %s", name)
			Expect(established(crd)).To(BeTrue(), "CRD %s is not Established: %v", name, crd.Status.Conditions)
		}
	})

	It("round-trips a ClusterPolicy through the API server", func(ctx SpecContext) {
		data, err := os.ReadFile(filepath.Join("testdata", "clusterpolicy.yaml"))
		Expect(err).NotTo(HaveOccurred())
		sent := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal(data, &sent.Object)).To(Succeed())

		policies := suite.dynamic.Resource(clusterPolicies)
		created, err := policies.Create(ctx, sent, metav1.CreateOptions{FieldValidation: "Strict"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			err := policies.Delete(ctx, sent.GetName(), metav1.DeleteOptions{})
			if !apierrors.IsNotFound(err) {
				Expect(err).NotTo(HaveOccurred())
			}
		})
		Expect(created.GetGeneration()).To(BeEquivalentTo(1))

		got, err := policies.Get(ctx, sent.GetName(), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		// charter never rewrites what a user applied: the spec comes back as sent.
		Expect(got.Object["spec"]).To(Equal(sent.Object["spec"]))

		// And it reads as charter's typed ClusterPolicy.
		var typed kyvernov1.ClusterPolicy
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(got.Object, &typed, true)).To(Succeed())
		Expect(typed.Spec.Rules).To(HaveLen(1))
		Expect(typed.Spec.Rules[0].Name).To(Equal("check-team"))
	})
})

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
