package crdschema

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/api/internal/roundtrip"
)

// kyvernoVersions are the versions Kyverno 1.19 serves for each kind
// charter serves, storage version first: a manifest written for Kyverno
// in any of them applies to charter.
var kyvernoVersions = map[string][]string{
	"policies.kyverno.io/ValidatingPolicy":                {"v1beta1", "v1alpha1", "v1"},
	"policies.kyverno.io/MutatingPolicy":                  {"v1beta1", "v1alpha1", "v1"},
	"policies.kyverno.io/GeneratingPolicy":                {"v1beta1", "v1alpha1", "v1"},
	"policies.kyverno.io/DeletingPolicy":                  {"v1beta1", "v1alpha1", "v1"},
	"policies.kyverno.io/ImageValidatingPolicy":           {"v1beta1", "v1alpha1", "v1"},
	"policies.kyverno.io/PolicyException":                 {"v1beta1", "v1alpha1", "v1"},
	"policies.kyverno.io/NamespacedValidatingPolicy":      {"v1beta1", "v1"},
	"policies.kyverno.io/NamespacedMutatingPolicy":        {"v1beta1", "v1"},
	"policies.kyverno.io/NamespacedGeneratingPolicy":      {"v1beta1", "v1"},
	"policies.kyverno.io/NamespacedDeletingPolicy":        {"v1beta1", "v1"},
	"policies.kyverno.io/NamespacedImageValidatingPolicy": {"v1beta1", "v1"},
	"kyverno.io/ClusterPolicy":                            {"v1", "v2beta1"},
	"kyverno.io/Policy":                                   {"v1", "v2beta1"},
	"kyverno.io/CleanupPolicy":                            {"v2", "v2beta1"},
	"kyverno.io/ClusterCleanupPolicy":                     {"v2", "v2beta1"},
	"kyverno.io/PolicyException":                          {"v2", "v2beta1"},
	"kyverno.io/GlobalContextEntry":                       {"v2alpha1", "v2beta1", "v2"},
	"kyverno.io/UpdateRequest":                            {"v2", "v1beta1"},
}

// TestServedVersions checks that each CRD serves the versions Kyverno 1.19
// serves, stores the one Kyverno stores, and that every version has the
// storage version's schema (but for its description), status subresource
// and columns: the versions
// convert with strategy None, which loses nothing only while they agree.
// A change to one version's Go type or markers (say the status shape or a
// printer column of api/policies/v1) that the others do not follow fails
// here.
func TestServedVersions(t *testing.T) {
	root, err := roundtrip.FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs under config/crd/bases (run make manifests): %v", err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		key := crd.Spec.Group + "/" + crd.Spec.Names.Kind
		want, ok := kyvernoVersions[key]
		if !ok {
			continue
		}
		seen[key] = true
		if c := crd.Spec.Conversion; c != nil && c.Strategy != apiextv1.NoneConverter {
			t.Errorf("%s: conversion strategy %s, want None", key, c.Strategy)
		}
		var served []string
		var storage *apiextv1.CustomResourceDefinitionVersion
		for i := range crd.Spec.Versions {
			v := &crd.Spec.Versions[i]
			if !v.Served {
				continue
			}
			served = append(served, v.Name)
			if v.Storage {
				storage = v
			}
		}
		if got, w := sorted(served), sorted(want); !slices.Equal(got, w) {
			t.Errorf("%s: serves %v, Kyverno 1.19 serves %v", key, got, w)
		}
		if storage == nil || storage.Name != want[0] {
			t.Errorf("%s: storage version %v, want %s", key, storage, want[0])
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == storage.Name {
				continue
			}
			if !reflect.DeepEqual(bodyOf(v.Schema), bodyOf(storage.Schema)) {
				t.Errorf("%s: the schema of %s differs from that of %s (storage)", key, v.Name, storage.Name)
			}
			if !reflect.DeepEqual(v.Subresources, storage.Subresources) {
				t.Errorf("%s: the subresources of %s differ from those of %s", key, v.Name, storage.Name)
			}
			if !reflect.DeepEqual(v.AdditionalPrinterColumns, storage.AdditionalPrinterColumns) {
				t.Errorf("%s: the printer columns of %s differ from those of %s", key, v.Name, storage.Name)
			}
		}
	}
	for key := range kyvernoVersions {
		if !seen[key] {
			t.Errorf("no CRD for %s under config/crd/bases", key)
		}
	}
}

// bodyOf is a version's schema without its top-level description, which
// each version's type may word for itself.
func bodyOf(v *apiextv1.CustomResourceValidation) *apiextv1.JSONSchemaProps {
	if v == nil || v.OpenAPIV3Schema == nil {
		return nil
	}
	s := v.OpenAPIV3Schema.DeepCopy()
	s.Description = ""
	return s
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
