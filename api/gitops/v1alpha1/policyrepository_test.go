package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestObjectID(t *testing.T) {
	tests := []struct {
		namespace, name, group, kind string
		id                           string
	}{
		{"team-a", "require-labels", "kyverno.io", "Policy", "team-a_require-labels_kyverno.io_Policy"},
		{"", "require-labels", "kyverno.io", "ClusterPolicy", "_require-labels_kyverno.io_ClusterPolicy"},
		{"team-a", "settings", "", "ConfigMap", "team-a_settings__ConfigMap"},
	}
	for _, tt := range tests {
		id := ObjectID(tt.namespace, tt.name, tt.group, tt.kind)
		if id != tt.id {
			t.Errorf("ObjectID() = %q, want %q", id, tt.id)
		}
		ns, name, group, kind, err := ParseObjectID(id)
		if err != nil || ns != tt.namespace || name != tt.name || group != tt.group || kind != tt.kind {
			t.Errorf("ParseObjectID(%q) = %q %q %q %q %v", id, ns, name, group, kind, err)
		}
	}
	for _, bad := range []string{"", "a_b_c", "a_b_c_d_e", "ns__g_Kind", "ns_name_g_"} {
		if _, _, _, _, err := ParseObjectID(bad); err == nil {
			t.Errorf("ParseObjectID(%q): want an error", bad)
		}
	}
}

func TestSpecDefaults(t *testing.T) {
	f := false
	tests := []struct {
		name                     string
		spec                     PolicyRepositorySpec
		interval, retry, timeout time.Duration
		prune                    bool
	}{
		{"absent", PolicyRepositorySpec{}, 5 * time.Minute, 5 * time.Minute, time.Minute, true},
		{"retry follows interval", PolicyRepositorySpec{Interval: &metav1.Duration{Duration: time.Minute}}, time.Minute, time.Minute, time.Minute, true},
		{"timeout below the minimum, stored before the API server refused it", PolicyRepositorySpec{Timeout: &metav1.Duration{Duration: time.Millisecond}},
			5 * time.Minute, 5 * time.Minute, MinTimeout, true},
		{"all set", PolicyRepositorySpec{
			Interval: &metav1.Duration{Duration: 10 * time.Minute}, RetryInterval: &metav1.Duration{Duration: 30 * time.Second},
			Timeout: &metav1.Duration{Duration: 2 * time.Minute}, Prune: &f,
		}, 10 * time.Minute, 30 * time.Second, 2 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.spec.GetInterval(); got != tt.interval {
				t.Errorf("GetInterval() = %v, want %v", got, tt.interval)
			}
			if got := tt.spec.GetRetryInterval(); got != tt.retry {
				t.Errorf("GetRetryInterval() = %v, want %v", got, tt.retry)
			}
			if got := tt.spec.GetTimeout(); got != tt.timeout {
				t.Errorf("GetTimeout() = %v, want %v", got, tt.timeout)
			}
			if got := tt.spec.IsPrune(); got != tt.prune {
				t.Errorf("IsPrune() = %v, want %v", got, tt.prune)
			}
		})
	}
}
