// Package podimages holds the container images of a resource as the
// image-verifying kinds see them (kyverno.io verifyImages rules and
// ImageValidatingPolicies): where each image is (a JSON pointer) and how
// it reads, the digest pins written back at those pointers, and the
// kyverno.io/verify-images annotations of the mutating phase. It imports
// no part of the engine's root.
package podimages

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/charter-dev/charter/engine/jsoncontext"
)

// Annotations the mutating phase writes, as Kyverno does (§2.7). charter
// writes them for compatibility but never reads them: the validating
// phase verifies again (through the cache) instead of trusting what a
// client could have written (§8.3).
const (
	AnnotationVerifyImages       = "kyverno.io/verify-images"
	AnnotationVerifyImagesScoped = "kyverno.io/verify-images-scoped"
)

// PodImage is one container image of a resource, where it is and how it
// reads.
type PodImage struct {
	// Pointer is the JSON pointer of the image field.
	Pointer string
	Info    jsoncontext.ImageInfo
	// Raw is the image as written.
	Raw string
	// Transformed says a custom extractor's jmesPath made Info from Raw:
	// a digest cannot be written back to Pointer.
	Transformed bool
}

// Of lists the images of the object's initContainers, containers and
// ephemeralContainers, in that order, and its imagePullSecrets.
func Of(obj map[string]any) ([]PodImage, []string) {
	prefix, spec := jsoncontext.PodSpecAt(obj)
	if spec == nil {
		return nil, nil
	}
	var out []PodImage
	for _, group := range []string{"initContainers", "containers", "ephemeralContainers"} {
		list, _ := spec[group].([]any)
		for i, c := range list {
			cm, _ := c.(map[string]any)
			image, _ := cm["image"].(string)
			if image == "" {
				continue
			}
			info, ok := jsoncontext.ParseImage(image)
			if !ok {
				continue
			}
			out = append(out, PodImage{Pointer: prefix + "/" + group + "/" + strconv.Itoa(i) + "/image", Info: info, Raw: image})
		}
	}
	return out, jsoncontext.PullSecrets(spec)
}

// Patches applies the digest pins (JSON pointer → image) to obj.
func Patches(obj map[string]any, pins map[string]string) (map[string]any, error) {
	for pointer, image := range pins {
		out, err := withValue(obj, PointerSegments(pointer), image)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pointer, err)
		}
		obj = out.(map[string]any)
	}
	return obj, nil
}

// withValue returns v with value set at path (map keys and list
// indexes), copying only the maps and lists on the path: v itself and
// what it shares with others are left untouched. Missing maps on the
// path are created; a missing list element is an error. This runs on
// every admission review with verifyImages rules, where a JSON patch
// round trip of the whole object cost more than the cached
// verification itself.
func withValue(v any, path []string, value any) (any, error) {
	if len(path) == 0 {
		return value, nil
	}
	switch t := v.(type) {
	case nil:
		child, err := withValue(nil, path[1:], value)
		if err != nil {
			return nil, err
		}
		return map[string]any{path[0]: child}, nil
	case map[string]any:
		child, err := withValue(t[path[0]], path[1:], value)
		if err != nil {
			return nil, err
		}
		out := make(map[string]any, len(t)+1)
		for k, e := range t {
			out[k] = e
		}
		out[path[0]] = child
		return out, nil
	case []any:
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i >= len(t) {
			return nil, fmt.Errorf("no list element %q", path[0])
		}
		child, err := withValue(t[i], path[1:], value)
		if err != nil {
			return nil, err
		}
		out := append([]any(nil), t...)
		out[i] = child
		return out, nil
	}
	return nil, fmt.Errorf("cannot set %q in %s", path[0], jsoncontext.KindOf(v))
}

// Annotations records the statuses of the mutating phase on obj (§2.7):
// kyverno.io/verify-images maps image → pass|fail|skip across all
// policies, kyverno.io/verify-images-scoped by policy and rule (scoped:
// policy → rule → image → status). Whatever a client wrote there is
// replaced.
func Annotations(obj map[string]any, scoped map[string]map[string]map[string]string) (map[string]any, error) {
	if len(scoped) == 0 {
		return obj, nil
	}
	flat := map[string]string{}
	for _, rules := range scoped {
		for _, images := range rules {
			for img, status := range images {
				if prev, ok := flat[img]; !ok || prev == "pass" || (prev == "skip" && status == "fail") {
					flat[img] = status
				}
			}
		}
	}
	flatJSON, err := json.Marshal(flat)
	if err != nil {
		return nil, err
	}
	scopedJSON, err := json.Marshal(map[string]any{"version": 1, "policies": scoped})
	if err != nil {
		return nil, err
	}
	meta, _ := obj["metadata"].(map[string]any)
	annotations := map[string]any{}
	if old, ok := meta["annotations"].(map[string]any); ok {
		for k, v := range old {
			annotations[k] = v
		}
	}
	annotations[AnnotationVerifyImages] = string(flatJSON)
	annotations[AnnotationVerifyImagesScoped] = string(scopedJSON)
	out, err := withValue(obj, []string{"metadata", "annotations"}, annotations)
	if err != nil {
		return nil, err
	}
	return out.(map[string]any), nil
}

// JSONPointer is the RFC 6901 pointer of a path: "~" and "/" in a
// segment are escaped, so map keys holding them still name one field.
func JSONPointer(path []string) string {
	var b strings.Builder
	for _, seg := range path {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(seg))
	}
	return b.String()
}

var (
	pointerEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
	pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

// PointerSegments splits a JSON pointer into its unescaped segments.
func PointerSegments(pointer string) []string {
	segs := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	for i, s := range segs {
		if strings.Contains(s, "~") {
			segs[i] = pointerUnescaper.Replace(s)
		}
	}
	return segs
}
