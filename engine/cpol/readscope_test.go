package cpol

import "testing"

func TestCheckAPIPathRead(t *testing.T) {
	for path, ok := range map[string]bool{
		"/api/v1/namespaces/team-a":                                  true,
		"/api/v1/namespaces/team-a/configmaps":                       true,
		"/api/v1/namespaces/team-a/pods?labelSelector=app%3Dweb":     true,
		"/apis/apps/v1/namespaces/team-a/deployments/web":            true,
		"/api/v1/namespaces/team-ab/pods":                            false,
		"/api/v1/namespaces/team-b/secrets":                          false,
		"/api/v1/namespaces":                                         false,
		"/api/v1/nodes":                                              false,
		"/apis/apps/v1/deployments":                                  false,
		"/api/v1/namespaces/team-a/../kube-system/secrets":           false,
		"/api/v1/namespaces/team-a%2F..%2Fkube-system/secrets":       false,
		"api/v1/namespaces/team-a/pods":                              false,
		"/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/roles": true,
	} {
		if err := checkAPIPathRead("team-a", path); (err == nil) != ok {
			t.Errorf("%s: error %v, want allowed=%v", path, err, ok)
		}
	}
	if err := checkAPIPathRead("", "/api/v1/nodes"); err != nil {
		t.Errorf("a cluster-wide policy is limited: %v", err)
	}
}
