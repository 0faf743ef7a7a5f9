package reports

import (
	"encoding/json"
	"hash/fnv"
)

// contentHash fingerprints what policies can see of a resource: labels,
// annotations, and the object without metadata and status. Like Kyverno it
// leaves out spec.nodeName, which the scheduler sets on every Pod. Status
// updates and resourceVersion bumps therefore do not cause a rescan.
func contentHash(obj map[string]any) uint64 {
	view := make(map[string]any, len(obj)+2)
	for k, v := range obj {
		switch k {
		case "metadata", "status":
		case "spec":
			if spec, ok := v.(map[string]any); ok {
				if _, has := spec["nodeName"]; has {
					trimmed := make(map[string]any, len(spec))
					for sk, sv := range spec {
						if sk != "nodeName" {
							trimmed[sk] = sv
						}
					}
					v = trimmed
				}
			}
			view[k] = v
		default:
			view[k] = v
		}
	}
	if meta, ok := obj["metadata"].(map[string]any); ok {
		view["\x00labels"] = meta["labels"]
		view["\x00annotations"] = meta["annotations"]
	}
	h := fnv.New64a()
	// json.Marshal writes map keys sorted, so equal content hashes equally.
	// Content decoded from JSON always encodes again.
	_ = json.NewEncoder(h).Encode(view)
	return h.Sum64()
}
