package podimages

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// TestImagePatchesLeaveTheInputAlone: pins and annotations are set on
// copies of the maps and lists on their path; the request's object (and
// whatever shares its subtrees) is never changed.
func TestImagePatchesLeaveTheInputAlone(t *testing.T) {
	in := map[string]any{"kind": "Pod", "metadata": map[string]any{"name": "p", "annotations": map[string]any{"a": "b"}},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "r.io/app:v1"}}}}
	before := runtime.DeepCopyJSON(in)

	out, err := Patches(in, map[string]string{"/spec/containers/0/image": "r.io/app:v1@sha256:aa"})
	if err != nil {
		t.Fatal(err)
	}
	out, err = Annotations(out, map[string]map[string]map[string]string{"/p": {"r": {"r.io/app@sha256:aa": "pass"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, before) {
		t.Fatalf("input changed: %v", in)
	}
	if got := out["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"]; got != "r.io/app:v1@sha256:aa" {
		t.Fatalf("image %v", got)
	}
	ann := out["metadata"].(map[string]any)["annotations"].(map[string]any)
	if ann["a"] != "b" || ann[AnnotationVerifyImages] != `{"r.io/app@sha256:aa":"pass"}` ||
		ann[AnnotationVerifyImagesScoped] != `{"policies":{"/p":{"r":{"r.io/app@sha256:aa":"pass"}}},"version":1}` {
		t.Fatalf("annotations %v", ann)
	}
	if _, err := Patches(in, map[string]string{"/spec/containers/3/image": "x"}); err == nil {
		t.Fatal("a pin of a missing container was applied")
	}
}

// TestPointersRoundTrip: a path whose segments hold "~" and "/" comes
// back from its pointer unchanged.
func TestPointersRoundTrip(t *testing.T) {
	path := []string{"spec", "a/b", "c~d", "0", "image"}
	pointer := JSONPointer(path)
	if pointer != "/spec/a~1b/c~0d/0/image" {
		t.Fatalf("pointer %q", pointer)
	}
	if got := PointerSegments(pointer); !reflect.DeepEqual(got, path) {
		t.Fatalf("segments %q, want %q", got, path)
	}
}
