package server

import (
	"encoding/json"
	"strings"
	"testing"
)

func ttlReview(t *testing.T, operation, value, oldValue string) []byte {
	t.Helper()
	obj := func(v string) any {
		if v == "-" {
			return nil
		}
		labels := map[string]any{"app": "x"}
		if v != "" {
			labels["cleanup.kyverno.io/ttl"] = v
		}
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm", "namespace": "team", "labels": labels}}
	}
	req := map[string]any{
		"uid": "uid-ttl", "kind": map[string]any{"group": "", "version": "v1", "kind": "ConfigMap"},
		"name": "cm", "namespace": "team", "operation": operation, "object": obj(value), "oldObject": obj(oldValue),
	}
	body, err := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestVerifyTTL(t *testing.T) {
	h := NewHandler(Options{Policies: staticSnapshots{testSnapshot(t)}})
	for _, tc := range []struct {
		name, op, value, old string
		allowed              bool
		message, warning     string
	}{
		{name: "duration", op: "CREATE", value: "2d", old: "-", allowed: true},
		{name: "timestamp", op: "CREATE", value: "2026-07-19T120000Z", old: "-", allowed: true},
		{name: "date", op: "UPDATE", value: "2026-07-19", old: "1h", allowed: true},
		{name: "no label", op: "CREATE", value: "", old: "-", allowed: true},
		{name: "invalid is refused", op: "CREATE", value: "10ay", old: "-",
			message: `cleanup.kyverno.io/ttl "10ay" is not a duration (e.g. 30s, 1h30m, 2d, 1w)`},
		{name: "partly valid is refused", op: "CREATE", value: "1d2x", old: "-", message: `"1d2x" is not a duration`},
		{name: "changed to invalid is refused", op: "UPDATE", value: "soon", old: "1h", message: `"soon" is not a duration`},
		{name: "invalid kept on update is admitted with a warning", op: "UPDATE", value: "10ay", old: "10ay", allowed: true,
			warning: "the object will not be deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := decision(t, h, PathVerifyTTL, ttlReview(t, tc.op, tc.value, tc.old))
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v (%+v)", resp.Allowed, tc.allowed, resp.Result)
			}
			if tc.message != "" && (resp.Result == nil || !strings.Contains(resp.Result.Message, tc.message)) {
				t.Errorf("message %+v, want %q", resp.Result, tc.message)
			}
			if tc.warning != "" && (len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], tc.warning)) {
				t.Errorf("warnings %q, want %q", resp.Warnings, tc.warning)
			}
		})
	}
}
