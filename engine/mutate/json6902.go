package mutate

import (
	"bytes"
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// json6902Options are Kyverno's (spec §3): negative indices count from the end,
// removing a missing path is a no-op, and add creates missing parents (a numeric or
// `-` segment creates a list).
var json6902Options = func() *jsonpatch.ApplyOptions {
	o := jsonpatch.NewApplyOptions()
	o.SupportNegativeIndices = true
	o.AllowMissingPathOnRemove = true
	o.EnsurePathExistsOnAdd = true
	return o
}()

// DecodeJSON6902 parses a patchesJson6902 string, already variable-substituted as
// text: a JSON array when its first character is `[`, YAML otherwise. Callers that
// apply one patch to many resources decode it once and use ApplyJSON6902.
func DecodeJSON6902(patches string) (jsonpatch.Patch, error) {
	raw := []byte(patches)
	if len(raw) == 0 || raw[0] != '[' {
		var err error
		raw, err = sigsyaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("failed to convert patchesJSON6902 to JSON: %w", err)
		}
	}
	p, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return nil, fmt.Errorf("failed to decode patchesJSON6902: %w", err)
	}
	return p, nil
}

// JSON6902 applies an RFC 6902 patch (YAML or JSON list of operations) to resource
// with Kyverno's options and returns a new object; resource is not modified. Errors
// are json-patch's own (the engine reports them as "failed to patch resource: …").
func JSON6902(resource map[string]any, patches string) (map[string]any, error) {
	p, err := DecodeJSON6902(patches)
	if err != nil {
		return nil, err
	}
	return ApplyJSON6902(resource, p)
}

// ApplyJSON6902 applies a decoded patch; see JSON6902.
func ApplyJSON6902(resource map[string]any, patch jsonpatch.Patch) (map[string]any, error) {
	doc, err := json.Marshal(resource)
	if err != nil {
		return nil, fmt.Errorf("resource: %w", err)
	}
	out, err := patch.ApplyWithOptions(doc, json6902Options)
	if err != nil {
		return nil, err
	}
	return decodeObject(out)
}

// decodeObject decodes JSON into an unstructured object, integral numbers as int64.
func decodeObject(b []byte) (map[string]any, error) {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return map[string]any{}, nil
	}
	var m map[string]any
	if err := utiljson.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("patched resource is not an object: %w", err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}
