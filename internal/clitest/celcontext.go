package clitest

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/internal/clitest/manifest"
)

// celContext serves the CEL policy libraries offline, as Kyverno's CLI
// does from a test's context file (kind: Context, cli.kyverno.io):
// spec.resources feed resource.Get and resource.List, spec.images feed
// image.GetMetadata by exact reference. The suite's clusterResources are
// served too.
type celContext struct {
	objects []*unstructured.Unstructured
	images  map[string]map[string]any
}

var (
	_ loader.ResourceLoader  = (*celContext)(nil)
	_ loader.ImageDataLoader = (*celContext)(nil)
)

// contextFile is a test's context file.
type contextFile struct {
	Spec struct {
		Resources []map[string]any `json:"resources,omitempty"`
		Images    []map[string]any `json:"images,omitempty"`
	} `json:"spec"`
}

// decodeContextFile reads a context file: Context documents.
func decodeContextFile(path string) (any, error) {
	docs, err := manifest.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := &celContext{images: map[string]map[string]any{}}
	for _, d := range docs {
		apiVersion, kind := d.TypeMeta()
		if kind != "Context" || apiVersion != "cli.kyverno.io/v1alpha1" {
			return nil, fmt.Errorf("%s: want a cli.kyverno.io/v1alpha1 Context, found %s %s", d.Where(), apiVersion, kind)
		}
		var c contextFile
		if err := manifest.DecodeDocument(d, &c); err != nil {
			return nil, err
		}
		for i, r := range c.Spec.Resources {
			u := &unstructured.Unstructured{Object: r}
			if u.GetAPIVersion() == "" || u.GetKind() == "" {
				return nil, fmt.Errorf("%s: spec.resources[%d]: missing apiVersion or kind", d.Where(), i)
			}
			out.objects = append(out.objects, u)
		}
		for i, img := range c.Spec.Images {
			ref, _ := img["image"].(string)
			if ref == "" {
				return nil, fmt.Errorf("%s: spec.images[%d]: missing image", d.Where(), i)
			}
			out.images[ref] = img
		}
	}
	return out, nil
}

// Resource returns the object, or nil when there is none.
func (c *celContext) Resource(_ context.Context, apiVersion, resource, namespace, name string) (map[string]any, error) {
	for _, o := range c.objects {
		if o.GetAPIVersion() == apiVersion && match.ResourceForKind(o.GetKind()) == resource &&
			o.GetNamespace() == namespace && o.GetName() == name {
			return o.Object, nil
		}
	}
	return nil, nil
}

// Resources lists the objects of the resource, in one namespace or all.
func (c *celContext) Resources(_ context.Context, apiVersion, resource, namespace string) ([]map[string]any, error) {
	out := []map[string]any{}
	for _, o := range c.objects {
		if o.GetAPIVersion() == apiVersion && match.ResourceForKind(o.GetKind()) == resource &&
			(namespace == "" || o.GetNamespace() == namespace) {
			out = append(out, o.Object)
		}
	}
	return out, nil
}

// ImageData returns the context file's data for the exact reference.
func (c *celContext) ImageData(_ context.Context, reference string, _ loader.ImageCredentials) (map[string]any, error) {
	if img, ok := c.images[reference]; ok {
		return img, nil
	}
	return nil, fmt.Errorf("image data for %s not found in the context", reference)
}
