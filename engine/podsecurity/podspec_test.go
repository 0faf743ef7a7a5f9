package podsecurity

import (
	"testing"

	"sigs.k8s.io/yaml"
)

func TestPodTemplate(t *testing.T) {
	container := `{containers: [{name: app, image: nginx, securityContext: {privileged: true}}]}`
	for _, tc := range []struct {
		name, doc string
		wantOK    bool
		wantLabel string
	}{
		{"Pod", `{kind: Pod, metadata: {name: p, labels: {l: pod}}, spec: ` + container + `}`, true, "pod"},
		{"Deployment", `{kind: Deployment, metadata: {labels: {l: deploy}}, spec: {template: {metadata: {labels: {l: tpl}}, spec: ` + container + `}}}`, true, "tpl"},
		{"StatefulSet", `{kind: StatefulSet, spec: {template: {metadata: {labels: {l: tpl}}, spec: ` + container + `}}}`, true, "tpl"},
		{"CronJob", `{kind: CronJob, spec: {jobTemplate: {spec: {template: {metadata: {labels: {l: cj}}, spec: ` + container + `}}}}}`, true, "cj"},
		{"custom controller", `{kind: CloneSet, spec: {template: {spec: ` + container + `}}}`, true, ""},
		{"Service", `{kind: Service, spec: {ports: [{port: 80}]}}`, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(tc.doc), &obj); err != nil {
				t.Fatal(err)
			}
			meta, spec, ok, err := PodTemplate(obj)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.wantOK {
				t.Fatalf("ok = %v", ok)
			}
			if !ok {
				return
			}
			if meta.Labels["l"] != tc.wantLabel {
				t.Errorf("label = %q, want %q", meta.Labels["l"], tc.wantLabel)
			}
			res, err := Evaluate(meta, spec, "baseline", "latest", nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed() || res.Checks[0].ID != "privileged" {
				t.Errorf("want privileged failure, got %+v", res.Checks)
			}
		})
	}

	var bad map[string]any
	_ = yaml.Unmarshal([]byte(`{kind: Pod, spec: {containers: "nope"}}`), &bad)
	if _, _, _, err := PodTemplate(bad); err == nil {
		t.Error("malformed spec: no error")
	}
}
