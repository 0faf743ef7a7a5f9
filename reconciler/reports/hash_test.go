package reports

import "testing"

func TestContentHash(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "web", "resourceVersion": "1", "labels": map[string]any{"app": "web"}},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx"}}},
			"status":   map[string]any{"phase": "Pending"},
		}
	}
	tests := []struct {
		name   string
		change func(m map[string]any)
		same   bool
	}{
		{"resourceVersion", func(m map[string]any) { m["metadata"].(map[string]any)["resourceVersion"] = "2" }, true},
		{"status", func(m map[string]any) { m["status"] = map[string]any{"phase": "Running"} }, true},
		{"spec.nodeName", func(m map[string]any) { m["spec"].(map[string]any)["nodeName"] = "node-1" }, true},
		{"labels", func(m map[string]any) { m["metadata"].(map[string]any)["labels"] = map[string]any{"app": "api"} }, false},
		{"annotations", func(m map[string]any) { m["metadata"].(map[string]any)["annotations"] = map[string]any{"a": "b"} }, false},
		{"spec", func(m map[string]any) {
			m["spec"].(map[string]any)["containers"] = []any{map[string]any{"name": "web", "image": "nginx:1.27"}}
		}, false},
	}
	want := contentHash(base())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base()
			tt.change(m)
			if got := contentHash(m); (got == want) != tt.same {
				t.Errorf("hash changed=%v, want changed=%v", got != want, !tt.same)
			}
		})
	}
}
