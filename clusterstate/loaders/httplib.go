package loaders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/cpol"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/internal/egress"
)

// DefaultHTTPBlocklist is what no outbound call of a policy (apiCall
// service URLs, the CEL http library, GlobalContextEntry apiCalls) nor
// image verification may reach unless the process says otherwise:
// egress.DefaultBlocklist (loopback, unspecified, link-local, the cloud
// metadata addresses, the node's own addresses).
var DefaultHTTPBlocklist = egress.DefaultBlocklist

// HTTPLimits are what the outbound calls charter makes for policies may
// reach: charter serve's --cel-http-blocklist, --cel-http-allowlist,
// --egress-allow, --egress-max-response-bytes and
// --allow-http-in-namespaced-policies, held by the one egress guard.
type HTTPLimits struct {
	// Blocklist holds host names, IP addresses, CIDR ranges and
	// egress.NodeAddresses no call may reach; nil means
	// DefaultHTTPBlocklist, an empty list blocks nothing.
	Blocklist []string
	// Allowlist, when not empty, holds the URL prefixes that are the
	// only ones a policy's call may name (the blocklist still applies to
	// them); matched on the parsed scheme, host, port and path. It does
	// not bind image registries, which the Pod's image names.
	Allowlist []string
	// AllowedAddresses are let through despite the blocklist
	// ("127.0.0.1:5000", a CIDR range): a registry or service on
	// loopback in tests and benches.
	AllowedAddresses []string
	// MaxResponseBytes bounds an answer (egress.DefaultMaxResponseBytes
	// when 0).
	MaxResponseBytes int64
	// AllowNamespacedPolicies lets namespaced policies call out (CEL
	// http, apiCall service URLs) (--allow-http-in-namespaced-policies);
	// off, as Kyverno's --allowHTTPInNamespacedPolicies, their calls fail.
	AllowNamespacedPolicies bool
}

// The flags behind HTTPLimits, named in refusals.
var flagHints = egress.Hints{
	Blocklist:        "--cel-http-blocklist",
	AllowAddress:     "--egress-allow",
	Allowlist:        "--cel-http-allowlist",
	MaxResponseBytes: "--egress-max-response-bytes",
}

// Guard builds the egress guard of policies' calls, each bounded by
// timeout (egress.DefaultTimeout when 0).
func (l HTTPLimits) Guard(timeout time.Duration) (*egress.Guard, error) {
	return egress.New(egress.WithBlocklist(l.Blocklist), egress.WithAllowlist(l.Allowlist),
		egress.WithAllowedAddresses(l.AllowedAddresses), egress.WithMaxResponseBytes(l.MaxResponseBytes),
		egress.WithTimeout(timeout), egress.WithHints(flagHints))
}

// RegistryGuard builds the egress guard of image verification (registries,
// transparency logs): the blocklist and allowed addresses, not the
// allowlist of policies' URLs. Its time is bounded by the verifier.
func (l HTTPLimits) RegistryGuard() (*egress.Guard, error) {
	return egress.New(egress.WithBlocklist(l.Blocklist), egress.WithAllowedAddresses(l.AllowedAddresses), egress.WithHints(flagHints))
}

// NamespacedHTTPRefusal is the fault of a namespaced policy's CEL http
// call, and of such a policy at admission, while
// HTTPLimits.AllowNamespacedPolicies is off; Kyverno's text with charter's
// flag.
const NamespacedHTTPRefusal = "http.* is not allowed in namespaced policies; set --allow-http-in-namespaced-policies to enable"

// NamespacedCallRefusal is the fault of a namespaced policy's apiCall
// service URL, at admission and when called, while
// HTTPLimits.AllowNamespacedPolicies is off.
const NamespacedCallRefusal = "a namespaced policy may not call out (charter serve --allow-http-in-namespaced-policies)"

// Validate reports a setting of the limits that does not parse, naming it.
func (l HTTPLimits) Validate() error {
	_, err := l.Guard(0)
	return err
}

// guard returns the parsed limits, parsed on first use.
func (a *APICalls) guard() (*egress.Guard, error) {
	a.guardOnce.Do(func() { a.egress, a.guardErr = a.HTTPLimits.Guard(a.ServiceTimeout) })
	return a.egress, a.guardErr
}

// libraryCall performs a CEL http library call and answers {body,
// statusCode} (loader.APICall.Library): a non-2xx status is no error and
// a body that is not JSON is null.
func (a *APICalls) libraryCall(ctx context.Context, method string, call loader.APICall, body []byte) (any, error) {
	if call.Namespace != "" && !a.HTTPLimits.AllowNamespacedPolicies {
		return nil, errors.New(NamespacedHTTPRefusal)
	}
	status, raw, err := a.send(ctx, method, call, body, true)
	if err != nil {
		return nil, err
	}
	var decoded any
	if json.Unmarshal(raw, &decoded) != nil {
		decoded = nil
	}
	return map[string]any{"body": decoded, "statusCode": status}, nil
}

// send checks the URL, then sends the request through the guarded client
// that trusts call.CABundle.
func (a *APICalls) send(ctx context.Context, method string, call loader.APICall, body []byte, library bool) (int, []byte, error) {
	g, err := a.guard()
	if err != nil {
		return 0, nil, err
	}
	u, err := url.Parse(call.URL)
	if err != nil {
		return 0, nil, err
	}
	// Checked here for a plain error before any connection; the client's
	// transport checks it again, with every redirect and the address
	// dialled.
	if err := g.CheckURL(u); err != nil {
		return 0, nil, err
	}
	client, err := a.client(call.CABundle, g, library)
	if err != nil {
		return 0, nil, err
	}
	return a.doService(ctx, client, g, method, call, body)
}

// statusOK is whether an apiCall entry's answer counts as an answer.
func statusOK(status int) bool { return status >= 200 && status < 300 }

// serviceRefusal is the fault of a namespaced policy's service call while
// the process does not allow it.
func (a *APICalls) serviceRefusal(call loader.APICall) error {
	if call.Namespace != "" && !a.HTTPLimits.AllowNamespacedPolicies {
		return fmt.Errorf("%s: %s", call.URL, NamespacedCallRefusal)
	}
	return nil
}

// CallFault is a place where a namespaced policy calls out while the
// process does not allow it.
type CallFault struct {
	// Field is the path in the policy, e.g.
	// spec.rules[0].context[1].apiCall.service.url.
	Field   string
	Message string
}

func (f CallFault) String() string { return f.Field + ": " + f.Message }

// NamespacedCallFaults returns every place a namespaced policy (kind of
// group, in its JSON form) calls out: apiCall service URLs of a kyverno.io
// Policy or CleanupPolicy (in any context list), CEL http expressions of a
// policies.kyverno.io Namespaced* kind. nil for a cluster-wide kind. The
// policy webhook and the GitOps pre-apply check refuse a policy with any,
// unless the process allows them (--allow-http-in-namespaced-policies);
// APICalls refuses the calls themselves too.
func NamespacedCallFaults(group, kind string, obj map[string]any) []CallFault {
	var fields []string
	msg := NamespacedCallRefusal
	switch {
	case group == "kyverno.io" && (kind == "Policy" || kind == "CleanupPolicy"):
		fields = cpol.ServiceCallFields(obj)
	case group == "policies.kyverno.io" && strings.HasPrefix(kind, "Namespaced"):
		fields, msg = celruntime.HTTPLibraryFields(obj), NamespacedHTTPRefusal
	}
	faults := make([]CallFault, len(fields))
	for i, f := range fields {
		faults[i] = CallFault{Field: f, Message: msg}
	}
	return faults
}
