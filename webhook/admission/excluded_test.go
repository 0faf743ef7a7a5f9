package admission

import (
	"slices"
	"testing"
)

func TestWebhookExcludedNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name  string
		asked []string
		want  []string
	}{
		{"none asked", nil, []string{"kube-system", "charter", "kube-node-lease", "kube-public"}},
		{"added after the fixed ones", []string{"monitoring", "istio-system"}, []string{"kube-system", "charter", "kube-node-lease", "kube-public", "monitoring", "istio-system"}},
		{"fixed ones and repeats once", []string{"charter", "kube-system", "kube-node-lease", "ops", "ops", ""}, []string{"kube-system", "charter", "kube-node-lease", "kube-public", "ops"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := webhookExcludedNamespaces("charter", tc.asked); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
