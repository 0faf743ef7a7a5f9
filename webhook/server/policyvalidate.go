package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/api/strict"
	"github.com/charter-dev/charter/engine"
)

// policyValidate refuses a ClusterPolicy, Policy or PolicyException that
// does not compile, with the engine's field-path errors, e.g.
//
//	ClusterPolicy "x": spec.rules[2].validate.pattern.spec.containers[0]: unknown anchor "~(x)"
//
// so an invalid policy never reaches the cluster. Deletes and subresource
// requests (status) are allowed untouched.
func (h *handlers) policyValidate(w http.ResponseWriter, r *http.Request) {
	var review rawReview
	if err := decodeReview(r, h.opts.MaxRequestBytes, &review); err != nil {
		writeError(w, err)
		return
	}
	ar := review.Request
	if ar.SubResource != "" || len(ar.Object) == 0 || string(ar.Object) == "null" {
		writeResponse(w, allowed(ar.UID, nil))
		return
	}
	if err := checkPolicyObject(ar.Kind.Kind, ar.Object); err != nil {
		writeResponse(w, denied(ar.UID, err.Error()))
		return
	}
	writeResponse(w, allowed(ar.UID, nil))
}

// checkPolicyObject decodes a policy object strictly and compiles it.
func checkPolicyObject(kind string, raw []byte) error {
	switch kind {
	case "ClusterPolicy", "Policy":
		var p kyvernov1.PolicyInterface = &kyvernov1.ClusterPolicy{}
		if kind == "Policy" {
			p = &kyvernov1.Policy{}
		}
		if err := strict.Unmarshal(raw, p); err != nil {
			return fmt.Errorf("%s %q: %w", kind, objectName(raw), err)
		}
		_, err := engine.Compile([]kyvernov1.PolicyInterface{p})
		return compileError(err)
	case "PolicyException":
		ex := &kyvernov2.PolicyException{}
		if err := strict.Unmarshal(raw, ex); err != nil {
			return fmt.Errorf("%s %q: %w", kind, objectName(raw), err)
		}
		_, err := engine.Compile(nil, engine.WithExceptions([]*kyvernov2.PolicyException{ex}))
		return compileError(err)
	}
	// The webhook configuration sends only the kinds above; anything else
	// is not ours to judge.
	return nil
}

// compileError returns the compile faults, or nil when there are none.
func compileError(err error) error {
	var faults engine.CompileErrors
	if errors.As(err, &faults) && len(faults) == 0 {
		return nil
	}
	return err
}

// objectName returns metadata.name of a raw object for error messages,
// or "" when it cannot be read.
func objectName(raw []byte) string {
	var probe struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return ""
	}
	if probe.Metadata.Namespace != "" {
		return probe.Metadata.Namespace + "/" + probe.Metadata.Name
	}
	return probe.Metadata.Name
}
