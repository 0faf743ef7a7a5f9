package server

import (
	"bytes"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/charter-dev/charter/engine"
)

// blockedMessage builds the denial message of a blocked request in
// Kyverno's format (admission-reports.md §1.2), which users and their tools
// match on:
//
//	"\n\nresource Pod/default/nginx was blocked due to the following policies \n\n" +
//	"<policy>:\n  <rule>: '<message>'\n"
//
// The body is a YAML map of policy name (without namespace, even for a
// Policy) to rule name to message, keys sorted, holding every rule that
// counts toward the block (see blocking) whose status is not pass or skip.
// The resource named is the one of the first response.
func blockedMessage(responses []*engine.Response) string {
	body := map[string]map[string]string{}
	var resource engine.ResourceRef
	for i, resp := range responses {
		if i == 0 {
			resource = resp.Resource
		}
		for _, p := range resp.Policies {
			for _, r := range p.Rules {
				if r.Status == engine.StatusPass || r.Status == engine.StatusSkip || r.Action != engine.Enforce {
					continue
				}
				name := p.Policy.GetName()
				if body[name] == nil {
					body[name] = map[string]string{}
				}
				body[name][r.Name] = r.Message
			}
		}
	}
	if len(body) == 0 {
		return ""
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(body); err != nil {
		// Maps of strings always encode; keep the facts if that ever changes.
		return "resource " + resource.String() + " was blocked: " + err.Error()
	}
	_ = enc.Close()
	return "\n\nresource " + resource.String() + " was blocked due to the following policies \n\n" +
		strings.TrimPrefix(buf.String(), "---\n")
}

// warnings lists the admission warnings of an allowed request, each
// "policy <policy>.<rule>: <message>" (admission-reports.md §1.5). A rule
// warns when its result is fail, error or warn and either its policy sets
// spec.emitWarning, or it is an Enforce rule that did not block (an error
// under failurePolicy Ignore, or an unscored policy's warn). Audit rules of
// policies without emitWarning stay silent: Kyverno runs them
// asynchronously, after the answer.
func warnings(responses []*engine.Response) []string {
	var out []string
	for _, resp := range responses {
		for _, p := range resp.Policies {
			emit := p.Policy.GetSpec().GetEmitWarning()
			for _, r := range p.Rules {
				switch r.Status {
				case engine.StatusFail, engine.StatusError, engine.StatusWarn:
				default:
					continue
				}
				if emit || (r.Action == engine.Enforce && r.Status != engine.StatusFail) {
					out = append(out, "policy "+p.Policy.GetName()+"."+r.Name+": "+r.Message)
				}
			}
		}
	}
	return out
}
