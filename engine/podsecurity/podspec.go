package podsecurity

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PodTemplate finds the Pod a resource describes: a Pod itself, the
// template of a CronJob (spec.jobTemplate.spec.template), or the template
// of any other kind with spec.template (Deployment, DaemonSet, StatefulSet,
// Job, ReplicaSet, ReplicationController and custom controllers). ok is
// false when the resource holds no Pod. The resource is not modified.
func PodTemplate(obj map[string]any) (meta metav1.ObjectMeta, spec *corev1.PodSpec, ok bool, err error) {
	kind, _ := obj["kind"].(string)
	var holder map[string]any
	var where string
	switch kind {
	case "Pod":
		holder, where = obj, ""
	case "CronJob":
		holder, where = nested(obj, "spec", "jobTemplate", "spec", "template"), "spec.jobTemplate.spec.template."
	default:
		holder, where = nested(obj, "spec", "template"), "spec.template."
	}
	if holder == nil {
		return metav1.ObjectMeta{}, nil, false, nil
	}
	rawSpec, _ := holder["spec"].(map[string]any)
	if rawSpec == nil && kind != "Pod" {
		return metav1.ObjectMeta{}, nil, false, nil
	}
	spec = &corev1.PodSpec{}
	if rawSpec != nil {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(rawSpec, spec); err != nil {
			return metav1.ObjectMeta{}, nil, false, fmt.Errorf("%s %sspec: %w", kind, where, err)
		}
	}
	if rawMeta, _ := holder["metadata"].(map[string]any); rawMeta != nil {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(rawMeta, &meta); err != nil {
			return metav1.ObjectMeta{}, nil, false, fmt.Errorf("%s %smetadata: %w", kind, where, err)
		}
	}
	return meta, spec, true, nil
}

func nested(obj map[string]any, path ...string) map[string]any {
	cur := obj
	for _, p := range path {
		next, _ := cur[p].(map[string]any)
		if next == nil {
			return nil
		}
		cur = next
	}
	return cur
}
