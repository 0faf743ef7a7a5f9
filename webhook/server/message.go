package server

import (
	"bytes"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
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
//
// A ValidatingPolicy's rules are not in that map: Kyverno's vpol webhook
// denies with "Policy <name> failed: <message>" for a failure and
// "Policy <name> error: <message>" for an error, joined by "; "
// (cel-policy-types.md §3.6); they follow the map when both kinds block.
func blockedMessage(responses []*engine.Response) string {
	var resource engine.ResourceRef
	var lines []blockedRule
	var cel []string
	for i, resp := range responses {
		if i == 0 {
			resource = resp.Resource
		}
		for _, p := range resp.Policies {
			for _, r := range p.Rules {
				if r.Status == engine.StatusPass || r.Status == engine.StatusSkip || r.Action != engine.Enforce {
					continue
				}
				if isCELPolicy(p.Policy) {
					cel = append(cel, celPolicyMessage(p.Policy.GetName(), r))
					continue
				}
				lines = append(lines, blockedRule{policy: p.Policy.GetName(), rule: r.Name, message: r.Message})
			}
		}
	}
	celText := strings.Join(cel, "; ")
	if len(lines) == 0 {
		return celText
	}
	head := "\n\nresource " + resource.String() + " was blocked due to the following policies \n\n"
	body, ok := formatBlocked(lines)
	if !ok {
		var err error
		if body, err = yamlBlocked(lines); err != nil {
			// Maps of strings always encode; keep the facts if that ever changes.
			head, body = "", "resource "+resource.String()+" was blocked: "+err.Error()
		}
	}
	if celText != "" {
		body += "\n" + celText
	}
	return head + body
}

// isCELPolicy reports whether a policy answers in the format of Kyverno's
// CEL policy webhooks rather than its ClusterPolicy webhook.
func isCELPolicy(p kyvernov1.PolicyInterface) bool {
	switch p.(type) {
	case policiesv1.ValidatingPolicyLike, policiesv1.ImageValidatingPolicyLike:
		return true
	}
	return false
}

// celPolicyMessage is Kyverno's line for a CEL policy's failed or errored
// result, in a denial and in a warning.
func celPolicyMessage(policy string, r engine.RuleResponse) string {
	verb := "failed"
	if r.Status == engine.StatusError {
		verb = "error"
	}
	return "Policy " + policy + " " + verb + ": " + r.Message
}

// blockedRule is one line of a denial: a rule that blocked and its message.
type blockedRule struct {
	policy, rule, message string
}

// yamlBlocked writes the denial's body with the YAML encoder: the map of
// policy to rule to message, a later rule of the same policy and name
// replacing an earlier one.
func yamlBlocked(lines []blockedRule) (string, error) {
	body := map[string]map[string]string{}
	for _, l := range lines {
		if body[l.policy] == nil {
			body[l.policy] = map[string]string{}
		}
		body[l.policy][l.rule] = l.message
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(body); err != nil {
		return "", err
	}
	_ = enc.Close()
	return strings.TrimPrefix(buf.String(), "---\n"), nil
}

// formatBlocked writes the denial's body by hand, byte for byte what
// yamlBlocked writes, when every name and message is of the common, simple
// shape where that is easy to be sure of (see simpleKey and simpleValue);
// otherwise it reports false and the YAML encoder writes it. Encoding
// through reflection was 5% of a review's time, 12% of a denial's.
func formatBlocked(lines []blockedRule) (string, bool) {
	for _, l := range lines {
		if !simpleKey(l.policy) || !simpleKey(l.rule) || !simpleValue(l.message) {
			return "", false
		}
	}
	// Stable, so that of two lines for the same policy and rule the later
	// one stays last and wins, as it does in the map.
	sort.SliceStable(lines, func(i, j int) bool {
		if lines[i].policy != lines[j].policy {
			return lines[i].policy < lines[j].policy
		}
		return lines[i].rule < lines[j].rule
	})
	var b strings.Builder
	size := 0
	for _, l := range lines {
		size += len(l.policy) + len(l.rule) + len(l.message) + 12
	}
	b.Grow(size)
	policy := ""
	for i, l := range lines {
		if i+1 < len(lines) && lines[i+1].policy == l.policy && lines[i+1].rule == l.rule {
			continue // replaced by the next line
		}
		if l.policy != policy {
			policy = l.policy
			b.WriteString(l.policy)
			b.WriteString(":\n")
		}
		b.WriteString("  ")
		b.WriteString(l.rule)
		b.WriteString(": ")
		writeScalar(&b, l.message)
		b.WriteByte('\n')
	}
	return b.String(), true
}

// simpleKey reports whether a policy or rule name is written plain by the
// YAML encoder and sorts there as it sorts byte by byte: it starts with a
// letter, holds only letters, '-' and '.', and is not one of yamlWords. Digits are left to the encoder, which
// orders them by numeric value ("rule9" before "rule10"), as are names
// over 128 bytes, which it writes as complex keys.
func simpleKey(s string) bool {
	if len(s) == 0 || len(s) > 128 || !isLetter(s[0]) || mayResolve(s) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isLetter(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// simpleValue reports whether a message is one writeScalar writes as the
// YAML encoder would: printable ASCII on one line, starting with a letter,
// and not one of yamlWords. Anything
// else (other leading characters, tabs, line breaks, non-ASCII text) is
// left to the encoder, which picks between more styles for it.
func simpleValue(s string) bool {
	if len(s) == 0 || !isLetter(s[0]) || mayResolve(s) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// writeScalar writes a simpleValue plain, or single-quoted when it holds
// what would end or comment a plain scalar in block context (": ", " #",
// a final ':' or space), with quotes doubled.
func writeScalar(b *strings.Builder, s string) {
	plain := !strings.Contains(s, ": ") && !strings.Contains(s, " #") && !strings.HasSuffix(s, ":") && !strings.HasSuffix(s, " ")
	if plain {
		b.WriteString(s)
		return
	}
	b.WriteByte('\'')
	for {
		i := strings.IndexByte(s, '\'')
		if i < 0 {
			break
		}
		b.WriteString(s[:i+1])
		b.WriteByte('\'')
		s = s[i+1:]
	}
	b.WriteString(s)
	b.WriteByte('\'')
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// yamlWords are the words the YAML encoder quotes because YAML 1.1 or 1.2
// reads them as booleans or null (in some of their spellings: matching
// them regardless of case sends a few more words to the encoder than
// needed, never fewer).
var yamlWords = []string{"y", "n", "yes", "no", "on", "off", "true", "false", "null"}

// mayResolve reports whether s is one of yamlWords.
func mayResolve(s string) bool {
	if len(s) > len("false") {
		return false
	}
	for _, w := range yamlWords {
		if strings.EqualFold(s, w) {
			return true
		}
	}
	return false
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
			// A CEL policy's GetSpec builds a Spec: read it only for a
			// response that may warn.
			emit, emitRead := false, false
			cel := isCELPolicy(p.Policy)
			for _, r := range p.Rules {
				switch r.Status {
				case engine.StatusFail, engine.StatusError, engine.StatusWarn:
				default:
					continue
				}
				if !emitRead {
					emit, emitRead = p.Policy.GetSpec().GetEmitWarning(), true
				}
				if cel {
					// Only validationActions Warn warns: an error let
					// through by failurePolicy Ignore stays silent, as
					// in Kyverno's vpol webhook.
					if emit {
						out = append(out, celPolicyMessage(p.Policy.GetName(), r))
					}
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
