package main

import (
	"reflect"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/charter-dev/charter/webhook/status"
)

// TestReportingAccessAsksAboutTheScanningIdentity: RBACPermissionsGranted
// asks about the identity background scans read as: this process's when
// it runs the reports controller with its own identity, the ServiceAccount
// its scans impersonate (charter dev --reports-service-account), or the
// reports Deployment's ServiceAccount when the controller runs elsewhere.
func TestReportingAccessAsksAboutTheScanningIdentity(t *testing.T) {
	cases := []struct {
		name     string
		o        serveOptions
		wantUser string // "" wants SelfAccess
	}{
		{"reports here, own identity", serveOptions{controllers: []string{controllerAdmission, controllerReports}}, ""},
		{"reports here, scanning as a ServiceAccount", func() serveOptions {
			o := serveOptions{controllers: []string{controllerAdmission, controllerReports}, namespace: "charter", reportsServiceAccount: "charter-reports"}
			o.reports.ServiceAccount = "kyverno/kyverno-reports-controller"
			return o
		}(), "system:serviceaccount:kyverno:kyverno-reports-controller"},
		{"reports elsewhere", serveOptions{controllers: []string{controllerAdmission}, namespace: "charter", reportsServiceAccount: "charter-reports"},
			"system:serviceaccount:charter:charter-reports"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := reportingAccess(&rest.Config{Host: "https://127.0.0.1:1"}, c.o)
			if err != nil {
				t.Fatal(err)
			}
			switch a := got.(type) {
			case status.SelfAccess:
				if c.wantUser != "" {
					t.Errorf("SelfAccess, want a SubjectAccessReview for %s", c.wantUser)
				}
			case status.SubjectAccess:
				if a.User != c.wantUser {
					t.Errorf("asks about %q, want %q", a.User, c.wantUser)
				}
			default:
				t.Errorf("got %v", reflect.TypeOf(got))
			}
		})
	}
	o := serveOptions{controllers: []string{controllerReports}}
	o.reports.ServiceAccount = "no-namespace"
	if _, err := reportingAccess(&rest.Config{Host: "https://127.0.0.1:1"}, o); err == nil {
		t.Error("a ServiceAccount without its namespace was taken")
	}
}
