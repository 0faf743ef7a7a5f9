package convert

import (
	"regexp"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/match"
)

// ClusterRead is a converted context entry that reads the cluster: a CEL
// variable computed with resource.Get or resource.List. A kyverno-test
// suite mocks the entry for the original through its rule values; the
// verifier feeds the same values to this variable.
type ClusterRead struct {
	// Rule is the source rule; Variable the entry's (and the CEL
	// variable's) name.
	Rule, Variable string
	// Numeric marks a count (a JMESPath ending in length()): a suite's
	// mock of it is text ("1") that Kyverno's operators read as a
	// number.
	Numeric bool
	// Inline is the read's CEL where it is bound for each foreach
	// element (cel.bind) rather than a policy variable: a mock takes the
	// place of this text.
	Inline string `json:",omitempty"`
}

// configMapRead is resource.Get of the ConfigMap; Kyverno's configMap
// entry holds the whole object, its data under .data.
func configMapRead(cm *kyvernov1.ConfigMapReference, scope *jmesScope) (expr, error) {
	ns := cm.Namespace
	if ns == "" {
		ns = "default"
	}
	nsExpr, err := templateString(ns, scope)
	if err != nil {
		return expr{}, wrap(err, "namespace")
	}
	nameExpr, err := templateString(cm.Name, scope)
	if err != nil {
		return expr{}, wrap(err, "name")
	}
	return fn("resource.Get", str("v1"), str("configmaps"), nsExpr, nameExpr), nil
}

// apiCallRead converts a GET of a Kubernetes API path to resource.Get (a
// named object) or resource.List (a collection, whose items the jmesPath
// reads), then the jmesPath over that result.
func apiCallRead(call *kyvernov1.ContextAPICall, scope *jmesScope) (jmesValue, error) {
	switch {
	case call.Service != nil:
		return jmesValue{}, cannot("apiCall to a service: http.Get in CEL, which a suite cannot mock")
	case call.Method != "" && call.Method != kyvernov1.MethodGet:
		return jmesValue{}, cannot("apiCall method %s", call.Method)
	case call.Default != nil:
		return jmesValue{}, cannot("apiCall default: resource.Get errs where Kyverno falls back")
	}
	read, err := apiPathRead(call.URLPath, scope)
	if err != nil {
		return jmesValue{}, err
	}
	if call.JMESPath == "" {
		return read, nil
	}
	return scope.convertOver(call.JMESPath, read)
}

// apiPathRead parses /api/v1[/namespaces/NS]/RESOURCE[/NAME] and
// /apis/GROUP/VERSION/... into a resource.Get or resource.List call.
func apiPathRead(urlPath string, scope *jmesScope) (jmesValue, error) {
	if strings.Contains(urlPath, "?") {
		return jmesValue{}, cannot("apiCall urlPath %q: query parameters", urlPath)
	}
	parts, err := pathSegments(strings.Trim(urlPath, "/"))
	if err != nil {
		return jmesValue{}, cannot("apiCall urlPath %q: %v", urlPath, err)
	}
	var apiVersion string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		apiVersion, parts = parts[1], parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		apiVersion, parts = parts[1]+"/"+parts[2], parts[3:]
	default:
		return jmesValue{}, cannot("apiCall urlPath %q is not a Kubernetes API path", urlPath)
	}
	if strings.Contains(apiVersion, "{{") {
		return jmesValue{}, cannot("apiCall urlPath %q: a variable API version", urlPath)
	}
	namespace := str("")
	// /api/v1/namespaces/NS/RESOURCE...: a namespaced resource; a path of
	// just namespaces[/NAME] reads Namespaces themselves.
	if len(parts) >= 3 && parts[0] == "namespaces" {
		ns, err := templateString(parts[1], scope)
		if err != nil {
			return jmesValue{}, wrap(err, "apiCall urlPath %q", urlPath)
		}
		namespace, parts = ns, parts[2:]
	}
	av := str(apiVersion)
	switch len(parts) {
	case 1:
		if strings.Contains(parts[0], "{{") {
			return jmesValue{}, cannot("apiCall urlPath %q: a variable resource", urlPath)
		}
		return jmesValue{e: fn("resource.List", av, str(parts[0]), namespace)}, nil
	case 2:
		name, err := templateString(parts[1], scope)
		if err != nil {
			return jmesValue{}, wrap(err, "apiCall urlPath %q", urlPath)
		}
		return jmesValue{e: fn("resource.Get", av, str(parts[0]), namespace, name)}, nil
	}
	return jmesValue{}, cannot("apiCall urlPath %q: a subresource or a path resource.Get cannot read", urlPath)
}

// pathSegments splits a path on "/" outside "{{ }}".
func pathSegments(p string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "{{"):
			depth++
			i++
		case strings.HasPrefix(p[i:], "}}"):
			depth--
			i++
		case p[i] == '/' && depth == 0:
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	if depth != 0 {
		return nil, cannot("unbalanced {{ }}")
	}
	return append(out, p[start:]), nil
}

// templateString converts a string that may hold "{{ }}" variables to a
// CEL string expression: a literal, one variable, or their concatenation.
func templateString(s string, scope *jmesScope) (expr, error) {
	if !strings.Contains(s, "{{") {
		return str(s), nil
	}
	var parts []expr
	last := 0
	for _, m := range variableRef.FindAllStringSubmatchIndex(s, -1) {
		if m[0] > last {
			parts = append(parts, str(s[last:m[0]]))
		}
		jv, err := scope.convert(s[m[2]:m[3]])
		if err != nil {
			return expr{}, err
		}
		if jv.str {
			parts = append(parts, jv.e)
		} else {
			parts = append(parts, fn("string", jv.e))
		}
		last = m[1]
	}
	if last < len(s) {
		parts = append(parts, str(s[last:]))
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	ss := make([]string, len(parts))
	for i, p := range parts {
		ss[i] = p.at(precAdd + 1)
	}
	return expr{strings.Join(ss, " + "), precAdd}, nil
}

// innerVariable is a variable quoted inside a JMESPath expression:
// '{{ x }}' (its value as a string) or `{{ x }}` (its value as JSON).
var innerVariable = regexp.MustCompile("'\\{\\{-?\\s*([^{}]*?)\\s*\\}\\}'|`\\{\\{-?\\s*([^{}]*?)\\s*\\}\\}`")

// convertOver converts a JMESPath applied to the value of over (an API
// call's result). The variables Kyverno substitutes into its text first
// become references to their converted expressions, which a filter over
// the result's items reads as roots, not as the item's fields.
func (s *jmesScope) convertOver(src string, over jmesValue) (jmesValue, error) {
	var failed error
	text := innerVariable.ReplaceAllStringFunc(src, func(m string) string {
		sub := innerVariable.FindStringSubmatch(m)
		ref, err := s.rootRef(sub[1] + sub[2])
		if err != nil {
			failed = err
			return m
		}
		return ref
	})
	if failed != nil {
		return jmesValue{}, failed
	}
	if strings.Contains(text, "{{") {
		return jmesValue{}, cannot("JMESPath %q: a variable outside quotes", src)
	}
	// The read is the expression's current node: "items[...]" reads its
	// items.
	return s.convertAt(src, text, &over)
}

// rootRef converts the variable src at the top level and returns a name
// that reads as that value anywhere in the expression it is put in.
func (s *jmesScope) rootRef(src string) (string, error) {
	jv, err := s.convert(src)
	if err != nil {
		return "", err
	}
	if s.refs == nil {
		s.refs = map[string]expr{}
	}
	name := "charterRef" + itoa(len(s.refs))
	s.refs[name] = jv.e
	return name, nil
}

// clusterVariable adds the converted read as the entry's CEL variable and
// records it for the verifier.
func clusterVariable(name string, v jmesValue, scope *jmesScope, out *convertedRule) error {
	if !isIdent(name) {
		return cannot("name is not a CEL identifier")
	}
	scope.variables[name] = true
	if scope.cluster == nil {
		scope.cluster = map[string]bool{}
	}
	scope.cluster[name] = true
	if v.list {
		if scope.lists == nil {
			scope.lists = map[string]bool{}
		}
		scope.lists[name] = true
	}
	out.variables = append(out.variables, admissionregistrationv1.Variable{Name: name, Expression: v.e.s})
	out.clusterReads = append(out.clusterReads, ClusterRead{Rule: out.name, Variable: name, Numeric: strings.HasPrefix(v.e.s, "size(")})
	return nil
}

// readsCluster reports whether e reads a variable converted from a
// context entry that reads the cluster, or a name bound to such a read
// for each foreach element.
func (s *jmesScope) readsCluster(e expr) bool {
	for name := range s.cluster {
		if regexp.MustCompile(`\bvariables\.` + name + `\b`).MatchString(e.s) {
			return true
		}
	}
	for name := range s.boundCluster {
		if regexp.MustCompile(`(^|[^.\w])` + name + `\b`).MatchString(e.s) {
			return true
		}
	}
	return false
}

// elementBinds are a foreach entry's context entries, evaluated for each
// element: cel.bind(name, value, ...) around what reads them.
type elementBinds []struct {
	name  string
	value expr
}

// around binds the names e reads, in the order of the entries (a later
// entry may read an earlier one).
func (b elementBinds) around(e expr) expr {
	if e.isTrue() || e.isFalse() {
		return e
	}
	for i := len(b) - 1; i >= 0; i-- {
		if regexp.MustCompile(`(^|[^.\w])` + b[i].name + `\b`).MatchString(e.s) {
			e = fn("cel.bind", atom(b[i].name), b[i].value, e)
		}
	}
	return e
}

// elementContext converts a foreach entry's context entries, which Kyverno
// loads again for each element: variables, configMap and apiCall reads
// (resource.Get/List) and imageRegistry reads (image.GetMetadata) of the
// element. Each becomes a name the entry's conditions read, bound around
// them; a read is recorded for the verifier, which feeds a suite's mock of
// the entry in place of the read's text.
func elementContext(entries []kyvernov1.ContextEntry, inner *jmesScope, out *convertedRule) (elementBinds, error) {
	var binds elementBinds
	for _, c := range entries {
		if !isIdent(c.Name) || reservedRoot[c.Name] || inner.variables[c.Name] {
			return nil, cannot("%s: the name is not a CEL identifier free to bind", c.Name)
		}
		var v jmesValue
		var err error
		read := true
		switch {
		case c.Variable != nil:
			read = false
			switch {
			case c.Variable.JMESPath != "" && c.Variable.Value == nil && c.Variable.Default == nil:
				v, err = inner.convert(c.Variable.JMESPath)
			default:
				err = cannot("a variable with a value or a default")
			}
		case c.ConfigMap != nil:
			v.e, err = configMapRead(c.ConfigMap, inner)
		case c.APICall != nil:
			v, err = apiCallRead(c.APICall, inner)
		case c.ImageRegistry != nil:
			v, err = imageRegistryRead(c.ImageRegistry, inner)
		default:
			err = cannot("a context entry of this kind")
		}
		if err != nil {
			return nil, wrap(err, "%s", c.Name)
		}
		if inner.refs == nil {
			inner.refs = map[string]expr{}
		}
		inner.refs[c.Name] = atom(c.Name)
		if v.list {
			if inner.lists == nil {
				inner.lists = map[string]bool{}
			}
			inner.lists[c.Name] = true
		}
		if read {
			if inner.boundCluster == nil {
				inner.boundCluster = map[string]bool{}
			}
			inner.boundCluster[c.Name] = true
			out.clusterReads = append(out.clusterReads, ClusterRead{Rule: out.name, Variable: c.Name, Numeric: strings.HasPrefix(v.e.s, "size("), Inline: v.e.s})
		}
		binds = append(binds, struct {
			name  string
			value expr
		}{c.Name, v.e})
	}
	return binds, nil
}

// imageRegistryRead is image.GetMetadata of the reference, the object
// Kyverno's imageRegistry entry holds, then the jmesPath over it.
func imageRegistryRead(r *kyvernov1.ImageRegistry, scope *jmesScope) (jmesValue, error) {
	if r.ImageRegistryCredentials != nil {
		return jmesValue{}, cannot("imageRegistry credentials: image.GetMetadata reads with the controller's")
	}
	ref, err := templateString(r.Reference, scope)
	if err != nil {
		return jmesValue{}, wrap(err, "reference")
	}
	read := fn("image.GetMetadata", ref)
	if r.JMESPath == "" {
		return jmesValue{e: read}, nil
	}
	// The jmesPath may read the metadata more than once: it is read
	// once, bound to a name.
	v, err := scope.convertOver(r.JMESPath, jmesValue{e: atom("metadata")})
	if err != nil {
		return jmesValue{}, err
	}
	v.e = fn("cel.bind", atom("metadata"), read, v.e)
	return v, nil
}

// mutateTargets converts one mutate-existing target to the expression
// that reads it, evaluated with object as the trigger: resource.Get of a
// named target, resource.List of a kind (by the selector's labels).
func mutateTargets(targets []kyvernov1.TargetResourceSpec, scope *jmesScope) (*policiesv1.TargetMatchConstraints, error) {
	if len(targets) != 1 {
		return nil, cannot("%d targets: a MutatingPolicy reads its targets with one expression", len(targets))
	}
	t := targets[0]
	switch {
	case len(t.Context) > 0 || t.RawAnyAllConditions != nil:
		return nil, cannot("a target's context or preconditions")
	case t.UID != "":
		return nil, cannot("a target by uid")
	case t.APIVersion == "" || t.Kind == "" || strings.ContainsAny(t.APIVersion+t.Kind, "*{"):
		return nil, cannot("a target needs a literal apiVersion and kind")
	}
	resource := str(match.ResourceForKind(t.Kind))
	ns, err := templateString(t.Namespace, scope)
	if err != nil {
		return nil, wrap(err, "namespace")
	}
	var read expr
	if t.Name != "" {
		if t.Selector != nil {
			return nil, cannot("a target with both a name and a selector")
		}
		name, err := templateString(t.Name, scope)
		if err != nil {
			return nil, wrap(err, "name")
		}
		read = fn("resource.Get", str(t.APIVersion), resource, ns, name)
	} else {
		args := []expr{str(t.APIVersion), resource, ns}
		if t.Selector != nil {
			if len(t.Selector.MatchExpressions) > 0 {
				return nil, cannot("selector.matchExpressions: resource.List selects by labels only")
			}
			args = append(args, labelsLiteral(t.Selector.MatchLabels))
		}
		read = fn("resource.List", args...)
	}
	return &policiesv1.TargetMatchConstraints{Expression: read.s}, nil
}

// labelsLiteral is a CEL map of labels, keys in order.
func labelsLiteral(labels map[string]string) expr {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	entries := make([]string, len(keys))
	for i, k := range keys {
		entries[i] = str(k).s + ": " + str(labels[k]).s
	}
	return atom("{" + strings.Join(entries, ", ") + "}")
}
