package mutate

import (
	"errors"
	"strings"
	"testing"
)

func TestStrategicMergeAcceptsYAMLText(t *testing.T) {
	res := mustYAML(t, `{apiVersion: v1, kind: Pod, metadata: {name: p}}`)
	got, err := StrategicMerge(res, "metadata:\n  labels:\n    +(a): b\n")
	if err != nil {
		t.Fatal(err)
	}
	want := mustYAML(t, `{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {a: b}}}`)
	if !Equal(got, want) {
		t.Fatalf("got %s", toYAML(got))
	}
}

func TestStrategicMergeRejectsNonObjectPatch(t *testing.T) {
	_, err := StrategicMerge(map[string]any{}, []any{"x"})
	if err == nil || !strings.Contains(err.Error(), "must be an object") {
		t.Fatalf("error = %v", err)
	}
}

func TestStrategicMergeResultSharesNothing(t *testing.T) {
	res := mustYAML(t, `{apiVersion: v1, kind: Pod, metadata: {name: p, annotations: {k: v}}, spec: {containers: [{name: c}]}}`)
	got, err := StrategicMerge(res, map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	got["metadata"].(map[string]any)["annotations"].(map[string]any)["k"] = "changed"
	got["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["name"] = "changed"
	if res["metadata"].(map[string]any)["annotations"].(map[string]any)["k"] != "v" ||
		res["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["name"] != "c" {
		t.Fatal("result aliases the input resource")
	}
}

func TestConditionErrorPath(t *testing.T) {
	res := mustYAML(t, `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {nodeSelector: {disk: hdd}}}`)
	_, err := StrategicMerge(res, map[string]any{"spec": map[string]any{"(nodeSelector)": map[string]any{"disk": "ssd"}}})
	var ce *ConditionError
	if !errors.As(err, &ce) || ce.Global || ce.Path != "/spec/(nodeSelector)" {
		t.Fatalf("error = %#v", err)
	}
	if errors.Is(err, ErrGlobalConditionNotMet) {
		t.Fatal("a plain condition must not match ErrGlobalConditionNotMet")
	}
}

func TestResultNumbersAreInt64(t *testing.T) {
	res := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "spec": map[string]any{"replicas": float64(3)}}
	got, err := StrategicMerge(res, map[string]any{"spec": map[string]any{"+(revisionHistoryLimit)": 2.0, "minReadySeconds": 1.5}})
	if err != nil {
		t.Fatal(err)
	}
	spec := got["spec"].(map[string]any)
	if _, ok := spec["replicas"].(int64); !ok {
		t.Errorf("replicas is %T, want int64", spec["replicas"])
	}
	if _, ok := spec["revisionHistoryLimit"].(int64); !ok {
		t.Errorf("revisionHistoryLimit is %T, want int64", spec["revisionHistoryLimit"])
	}
	if v, ok := spec["minReadySeconds"].(float64); !ok || v != 1.5 {
		t.Errorf("minReadySeconds = %#v, want 1.5", spec["minReadySeconds"])
	}
}

// The webhook calls StrategicMerge from many requests at once on one compiled patch;
// run with -race.
func TestStrategicMergeConcurrentUse(t *testing.T) {
	deploy := mustYAML(t, benchDeployment)
	done := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			var err error
			for j := 0; j < 20 && err == nil; j++ {
				_, err = StrategicMerge(deploy, benchSecurityContext)
			}
			done <- err
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
