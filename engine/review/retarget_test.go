package review

import (
	"errors"
	"testing"
)

// A patch that keeps the target's identity passes; one that moves it (its
// namespace removed) is a retargetError naming the change.
func TestCheckRetarget(t *testing.T) {
	read := ResourceRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "settings"}
	same := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"namespace": "team-a", "name": "settings", "labels": map[string]any{"x": "y"}}}
	if err := CheckRetarget("r", read, same); err != nil {
		t.Errorf("same identity: %v", err)
	}
	moved := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "settings"}}
	err := CheckRetarget("r", read, moved)
	var re *retargetError
	if !errors.As(err, &re) || len(re.Changes) != 1 || re.Changes[0] != (identityChange{Field: "namespace", From: "team-a", To: ""}) {
		t.Fatalf("namespace removed: %v", err)
	}
}
