package convert

import (
	"strings"

	gojmespath "github.com/kyverno/go-jmespath"
)

// jmesValue is a JMESPath expression converted to CEL. list is set when
// the value is known to be a list (a projection or list literal), which
// the condition operators need to pick between scalar and list forms.
type jmesValue struct {
	e    expr
	list bool
	// lit holds the decoded value of a literal, for operators that read
	// wildcards, ranges or quantities in their value.
	lit    any
	hasLit bool
	// projected marks the result of a projection (map over a list), whose
	// elements may be lists that [] flattens.
	projected bool
	// fallback is the default of "request.operation || 'BACKGROUND'":
	// the request field is never missing, only empty in a background
	// scan, which conditions check against (see jmesScope.condition).
	fallback *string
	// boolean marks a comparison or logical expression.
	boolean bool
	// elemStr marks a list of strings (keys(), split()).
	elemStr bool
	// str marks a value known to be a string (a map key from keys(), a
	// field that always holds one), for contains().
	str bool
}

// jmesScope is what names mean in an expression: the foreach element's
// variable, and the context variables converted to CEL variables.
type jmesScope struct {
	// pinned is set while converting an expression that writes
	// request."object": quoted, Kyverno's autogen leaves it alone, so it
	// reads the controller's own fields; pinned paths are written
	// object['metadata'], which CEL autogen does not rewrite either.
	pinned    bool
	element   string
	variables map[string]bool
	// shared are repeated condition keys bound to CEL variables
	// (shareRepeatedKeys).
	shared map[string]jmesValue
	// target names the resource (a cleanup policy's conditions).
	target bool
	// operations are those the policy's matchConstraints select, which
	// decide conditions on request.operation (operationCondition).
	operations []string
	vars       *iterNames
	// refs are the variables quoted inside an API call's JMESPath,
	// replaced by names that read as roots anywhere (convertOver).
	refs map[string]expr
	// cluster are the variables that read the cluster (clusterVariable).
	cluster map[string]bool
	// boundCluster are the names bound to a read of the cluster for each
	// foreach element (elementContext).
	boundCluster map[string]bool
	// lists are the variables known to hold a list.
	lists map[string]bool
	// root, when set, is what other names are fields of: a verifyImages
	// attestation's conditions read the predicate's fields as roots.
	root string
}

func (s *jmesScope) convert(src string) (jmesValue, error) {
	return s.convertAt(src, src, nil)
}

// convertAt converts the JMESPath text with cur as its current node (nil:
// bare fields name roots); src is the text as the policy wrote it, for
// the reason when it does not convert.
func (s *jmesScope) convertAt(src, text string, cur *jmesValue) (jmesValue, error) {
	n, err := gojmespath.NewParser().Parse(text)
	if err != nil {
		return jmesValue{}, cannot("JMESPath %q: %v", src, err)
	}
	s.pinned = strings.Contains(text, `request."object"`)
	defer func() { s.pinned = false }()
	v, err := s.node(n, cur, false)
	if err != nil {
		var u *unconvertible
		if asUnconvertible(err, &u) {
			return jmesValue{}, cannot("JMESPath %q: %s", src, u.reason)
		}
		return jmesValue{}, err
	}
	return v, nil
}

func asUnconvertible(err error, out **unconvertible) bool {
	u, ok := err.(*unconvertible)
	if ok {
		*out = u
	}
	return ok
}

// node converts n. cur is the current node inside a projection or filter
// (nil at the top, where bare fields name roots); optional renders field
// access that tolerates a missing key (inside ||), as JMESPath does there.
func (s *jmesScope) node(n gojmespath.ASTNode, cur *jmesValue, optional bool) (jmesValue, error) {
	switch n.NodeType {
	case gojmespath.ASTLiteral:
		return literalValue(n.Value)
	case gojmespath.ASTField, gojmespath.ASTSubexpression, gojmespath.ASTIndexExpression:
		return s.path(n, cur, optional)
	case gojmespath.ASTCurrentNode, gojmespath.ASTIdentity:
		if cur == nil {
			return jmesValue{}, cannot("@ at the top level")
		}
		return *cur, nil
	case gojmespath.ASTOrExpression:
		return s.orExpression(n, cur, optional)
	case gojmespath.ASTAndExpression, gojmespath.ASTNotExpression:
		var parts []expr
		for _, c := range n.Children {
			v, err := s.node(c, cur, optional)
			if err != nil {
				return jmesValue{}, err
			}
			if !v.boolean {
				if v, err = truthy(c, v); err != nil {
					return jmesValue{}, err
				}
			}
			parts = append(parts, v.e)
		}
		if n.NodeType == gojmespath.ASTNotExpression {
			return jmesValue{e: not(parts[0]), boolean: true}, nil
		}
		return jmesValue{e: and(parts...), boolean: true}, nil
	case gojmespath.ASTComparator:
		l, err := s.node(n.Children[0], cur, true)
		if err != nil {
			return jmesValue{}, err
		}
		r, err := s.node(n.Children[1], cur, true)
		if err != nil {
			return jmesValue{}, err
		}
		ops := map[string]string{"tEQ": "==", "tNE": "!=", "tLT": "<", "tLTE": "<=", "tGT": ">", "tGTE": ">="}
		op, ok := ops[toString(n.Value)]
		if !ok {
			return jmesValue{}, cannot("comparator %v", n.Value)
		}
		if op == "==" || op == "!=" {
			// JMESPath tolerates a missing key in a comparison; an
			// optional on either side compares with null.
			l.e, r.e = orNull(l.e), orNull(r.e)
		}
		return jmesValue{e: rel(l.e, op, r.e), boolean: true}, nil
	case gojmespath.ASTProjection, gojmespath.ASTFilterProjection:
		return s.projection(n, cur, optional)
	case gojmespath.ASTFlatten:
		v, err := s.node(n.Children[0], cur, optional)
		if err != nil {
			return jmesValue{}, err
		}
		if v.projected {
			// A projection of lists: [] flattens one level.
			return jmesValue{e: call(v.e, "flatten"), list: true}, nil
		}
		v.list = true
		return v, nil
	case gojmespath.ASTMultiSelectList:
		return s.multiSelect(n, cur)
	case gojmespath.ASTMultiSelectHash:
		return s.multiSelectHash(n, cur)
	case gojmespath.ASTValueProjection:
		return s.imageRegistries(n, cur)
	case gojmespath.ASTFunctionExpression:
		return s.function(n, cur)
	case gojmespath.ASTPipe:
		left, err := s.node(n.Children[0], cur, optional)
		if err != nil {
			return jmesValue{}, err
		}
		return s.node(n.Children[1], &left, optional)
	}
	return jmesValue{}, cannot("%s", n.NodeType)
}

// truthy converts an operand of && or ! that is not itself a condition:
// JMESPath tests its truthiness (false, null, "", [] and {} are false). A
// field that holds a boolean (a volume mount's readOnly) is false when
// missing; other values are refused rather than guessed.
func truthy(n gojmespath.ASTNode, v jmesValue) (jmesValue, error) {
	chain, ok := fieldChain(n)
	if ok && len(chain) > 0 {
		if last, _ := chain[len(chain)-1].(string); knownBools[last] {
			e := v.e
			if isOptional(e) {
				e = call(e, "orValue", celFalse)
			}
			return jmesValue{e: e, boolean: true}, nil
		}
	}
	return jmesValue{}, cannot("truthiness of %s, which may not be a boolean", v.e)
}

// knownBools are Kubernetes fields that hold a boolean.
var knownBools = map[string]bool{
	"readOnly": true, "privileged": true, "allowPrivilegeEscalation": true, "readOnlyRootFilesystem": true,
	"runAsNonRoot": true, "hostNetwork": true, "hostPID": true, "hostIPC": true, "hostProcess": true,
	"automountServiceAccountToken": true, "stdin": true, "tty": true, "shareProcessNamespace": true,
}

func orNull(e expr) expr {
	if isOptional(e) {
		return call(e, "orValue", atom("null"))
	}
	return e
}

func toString(v any) string {
	if s, ok := v.(interface{ String() string }); ok {
		return s.String()
	}
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

func literalValue(v any) (jmesValue, error) {
	if l, ok := v.([]any); ok {
		var parts []string
		for _, e := range l {
			x, ok := literal(e)
			if !ok {
				return jmesValue{}, cannot("list literal of non-scalars")
			}
			parts = append(parts, x.s)
		}
		return jmesValue{e: atom("[" + strings.Join(parts, ", ") + "]"), list: true, lit: v, hasLit: true}, nil
	}
	if m, ok := v.(map[string]any); ok && len(m) == 0 {
		// The default of a map: `{}`.
		return jmesValue{e: atom("{}"), lit: v, hasLit: true}, nil
	}
	x, ok := literal(v)
	if !ok {
		return jmesValue{}, cannot("literal %v", v)
	}
	return jmesValue{e: x, lit: v, hasLit: true}, nil
}

// fieldChain flattens a chain of fields, subexpressions and indexes.
func fieldChain(n gojmespath.ASTNode) ([]any, bool) {
	switch n.NodeType {
	case gojmespath.ASTField:
		return []any{n.Value.(string)}, true
	case gojmespath.ASTSubexpression, gojmespath.ASTIndexExpression:
		var out []any
		for _, c := range n.Children {
			part, ok := fieldChain(c)
			if !ok {
				return nil, false
			}
			out = append(out, part...)
		}
		return out, true
	case gojmespath.ASTIndex:
		return []any{n.Value}, true
	case gojmespath.ASTIdentity, gojmespath.ASTCurrentNode:
		return nil, true
	}
	return nil, false
}

// path converts a chain of fields to CEL, mapping Kyverno's roots to the
// CEL policy's: request.object is object, element is the foreach variable.
func (s *jmesScope) path(n gojmespath.ASTNode, cur *jmesValue, optional bool) (jmesValue, error) {
	chain, ok := fieldChain(n)
	if !ok {
		// A subexpression whose right side is a projection:
		// a.b[*].c parses as Subexpression(a.b, Projection(...)).
		if n.NodeType == gojmespath.ASTSubexpression && len(n.Children) == 2 {
			left, err := s.node(n.Children[0], cur, optional)
			if err != nil {
				return jmesValue{}, err
			}
			return s.node(n.Children[1], &left, optional)
		}
		return jmesValue{}, cannot("path %s", n.NodeType)
	}
	var base expr
	rest := chain
	if cur == nil && len(chain) == 0 {
		return jmesValue{}, cannot("@ at the top level")
	}
	ref, isRef := expr{}, false
	if len(chain) > 0 {
		if name, ok := chain[0].(string); ok {
			ref, isRef = s.refs[name]
		}
	}
	if isRef {
		base, rest = ref, chain[1:]
	} else if cur != nil {
		base = cur.e
	} else {
		first, _ := chain[0].(string)
		switch {
		case first == "request" && len(chain) > 1 && (chain[1] == "object" || chain[1] == "oldObject"):
			base, rest = atom(chain[1].(string)), chain[2:]
			if s.pinned && chain[1] == "object" && len(rest) > 0 {
				if key, ok := rest[0].(string); ok {
					base, rest = atom("object["+str(key).s+"]"), rest[1:]
				}
			}
		case first == "request" && len(chain) > 1:
			switch chain[1] {
			case "operation", "namespace", "name":
				base, rest = atom("request."+chain[1].(string)), chain[2:]
			case "userInfo":
				base, rest = atom("request.userInfo"), chain[2:]
			case "kind":
				base, rest = atom("request.kind"), chain[2:]
			default:
				return jmesValue{}, cannot("request.%v", chain[1])
			}
			optional = false
		case first == "target" && s.target:
			base, rest = atom("object"), chain[1:]
		case first == "serviceAccountName" && len(chain) == 1:
			// Kyverno's name of a service account user.
			return jmesValue{e: atom(serviceAccountNameCEL), str: true}, nil
		case first == "element" && s.element != "":
			base, rest = atom(s.element), chain[1:]
		case s.variables[first]:
			base, rest = atom("variables."+first), chain[1:]
		case s.root != "":
			base = atom(s.root)
		default:
			return jmesValue{}, cannot("variable %q", first)
		}
	}
	e := base
	for _, part := range rest {
		switch p := part.(type) {
		case string:
			if optional {
				if isIdent(p) {
					e = atom(e.at(precAtom) + ".?" + p)
				} else {
					e = atom(e.at(precAtom) + "[?" + str(p).s + "]")
				}
			} else {
				e = field(e, p)
			}
		case int:
			e = atom(e.at(precAtom) + "[" + itoa(p) + "]")
		default:
			return jmesValue{}, cannot("index %v", part)
		}
	}
	if len(chain) == 0 {
		return jmesValue{e: e}, nil
	}
	if first, _ := chain[0].(string); len(chain) == 1 && cur == nil && s.lists[first] && strings.HasPrefix(e.s, "variables.") {
		return jmesValue{e: e, list: true}, nil
	}
	last, _ := chain[len(chain)-1].(string)
	return jmesValue{e: e, list: knownLists[last], str: knownStrings[last]}, nil
}

// serviceAccountNameCEL is Kyverno's serviceAccountName variable: the
// name of the service account making the request, "" for other users.
const serviceAccountNameCEL = "(request.userInfo.username.startsWith('system:serviceaccount:') ? request.userInfo.username.split(':')[3] : '')"

// knownStrings are Kubernetes fields that hold a string.
var knownStrings = map[string]bool{
	"host": true, "name": true, "image": true, "path": true, "namespace": true, "mountPath": true,
	"hostname": true, "serviceAccountName": true, "priorityClassName": true, "runtimeClassName": true,
}

// knownLists are Kubernetes fields that hold lists, for the operators
// that treat a list key differently from a scalar one (AnyIn: any
// element).
var knownLists = map[string]bool{
	"resources": true, "verbs": true, "apiGroups": true, "resourceNames": true, "nonResourceURLs": true,
	"containers": true, "initContainers": true, "ephemeralContainers": true, "volumes": true,
	"volumeMounts": true, "args": true, "command": true, "env": true, "envFrom": true, "ports": true,
	"rules": true, "subjects": true, "finalizers": true, "tolerations": true, "hostAliases": true,
	"imagePullSecrets": true, "drop": true, "add": true, "externalIPs": true, "tls": true, "hosts": true,
	"paths": true, "secrets": true, "accessModes": true, "sysctls": true, "topologySpreadConstraints": true,
}

func itoa(i int) string {
	v, _ := literal(i)
	return v.s
}

// projection converts list[].f and list[?cond].f to map and filter.
func (s *jmesScope) projection(n gojmespath.ASTNode, cur *jmesValue, optional bool) (jmesValue, error) {
	left, err := s.node(n.Children[0], cur, optional)
	if err != nil {
		return jmesValue{}, err
	}
	if optional && isOptional(left.e) {
		// Under ||: a missing list projects to nothing.
		left.e = call(left.e, "orValue", atom("[]"))
	} else if chain, ok := fieldChain(n.Children[0]); ok && len(chain) > 0 && !isOptional(left.e) {
		// A projection over a missing list is null, which filters and
		// foreach lists read as nothing: the list's last step is
		// optional (a Pod's containers and a list's items are always
		// there).
		if key, ok := chain[len(chain)-1].(string); ok && key != "containers" && key != "items" {
			if prefix, ok := strings.CutSuffix(left.e.s, field(atom(""), key).s); ok && prefix != "" {
				left.e = call(atom(prefix+optionalStep(key)), "orValue", atom("[]"))
			}
		}
	}
	x := s.vars.name(lastSegment(strings.TrimSuffix(left.e.s, ".flatten()")))
	defer s.vars.release(x)
	xv := jmesValue{e: atom(x), str: left.elemStr}
	list := left.e
	if n.NodeType == gojmespath.ASTFilterProjection {
		cond, err := s.filterCondition(n.Children[2], &xv)
		if err != nil {
			return jmesValue{}, err
		}
		list = macro(list, "filter", x, cond)
	}
	right := n.Children[1]
	if right.NodeType == gojmespath.ASTIdentity || right.NodeType == gojmespath.ASTCurrentNode {
		return jmesValue{e: list, list: true, elemStr: left.elemStr}, nil
	}
	chain, ok := fieldChain(right)
	if !ok {
		// A function or expression of each element (drop[].to_upper(@));
		// elements missing the field it starts from are left out.
		switch right.NodeType {
		case gojmespath.ASTSubexpression, gojmespath.ASTProjection, gojmespath.ASTFilterProjection:
			// The projection over a missing list (volumeMounts[?...])
			// is null too, and left out.
			if prefix, ok := fieldChain(right.Children[0]); ok {
				var guards []expr
				e := xv.e
				for _, part := range prefix {
					if key, ok := part.(string); ok {
						guards = append(guards, has(e, key))
						e = field(e, key)
					}
				}
				list = macro(list, "filter", x, and(guards...))
			}
		}
		v, err := s.node(right, &xv, false)
		if err != nil {
			return jmesValue{}, err
		}
		return jmesValue{e: macro(list, "map", x, v.e), list: true, projected: true}, nil
	}
	// JMESPath leaves out elements where the path is missing.
	var guards []expr
	e := xv.e
	for _, part := range chain {
		key, ok := part.(string)
		if !ok {
			return jmesValue{}, cannot("index in a projection")
		}
		guards = append(guards, has(e, key))
		e = field(e, key)
	}
	if len(guards) > 0 && !isAlwaysThere(chain) {
		list = macro(list, "filter", x, and(guards...))
	}
	return jmesValue{e: macro(list, "map", x, e), list: true, projected: true}, nil
}

// optionalStep is the optional selection of key: .?key, or [?'key'].
func optionalStep(key string) string {
	if isIdent(key) {
		return ".?" + key
	}
	return "[?" + str(key).s + "]"
}

// filterCondition converts a filter's condition; a bare field is a test
// of its presence (JMESPath truthiness, for the usual case).
func (s *jmesScope) filterCondition(n gojmespath.ASTNode, cur *jmesValue) (expr, error) {
	if chain, ok := fieldChain(n); ok && len(chain) == 1 {
		if key, ok := chain[0].(string); ok {
			return has(cur.e, key), nil
		}
	}
	v, err := s.node(n, cur, true)
	return v.e, err
}

// multiSelect converts [a, b, c] over the current node, flattened by the
// [] that follows it in practice: the lists concatenated, a missing one
// as empty.
func (s *jmesScope) multiSelect(n gojmespath.ASTNode, cur *jmesValue) (jmesValue, error) {
	if cur == nil {
		return jmesValue{}, cannot("multi-select list at the top level")
	}
	var parts []string
	for _, c := range n.Children {
		chain, ok := fieldChain(c)
		if !ok || len(chain) != 1 {
			return jmesValue{}, cannot("multi-select of %s", c.NodeType)
		}
		key, _ := chain[0].(string)
		if key == "containers" {
			e := field(cur.e, key)
			if isOptional(e) {
				// Under ||, the path to a Pod's containers is read
				// optionally too.
				e = call(e, "orValue", atom("[]"))
			}
			parts = append(parts, e.s)
			continue
		}
		v, err := s.path(c, cur, true)
		if err != nil {
			return jmesValue{}, err
		}
		parts = append(parts, call(v.e, "orValue", atom("[]")).s)
	}
	return jmesValue{e: expr{strings.Join(parts, " + "), precAdd}, list: true}, nil
}

// imageRegistries converts images.<list>.*.registry, the registries of a
// Pod's container images as Kyverno's images variable parses them: the
// first path element when it holds a "." or a ":" or is localhost, else
// docker.io (CEL's image().registry() says index.docker.io). Kyverno
// leaves out an image that does not parse; the CEL reads it too.
func (s *jmesScope) imageRegistries(n gojmespath.ASTNode, cur *jmesValue) (jmesValue, error) {
	left, lok := fieldChain(n.Children[0])
	right, rok := fieldChain(n.Children[1])
	if cur != nil || !lok || !rok || len(left) != 2 || left[0] != "images" || len(right) != 1 || right[0] != "registry" {
		return jmesValue{}, cannot("value projection other than images.<containers>.*.registry")
	}
	list, _ := left[1].(string)
	var containers expr
	switch list {
	case "containers":
		containers = atom("object.spec.containers")
	case "initContainers", "ephemeralContainers":
		containers = call(atom("object.spec.?"+list), "orValue", atom("[]"))
	default:
		return jmesValue{}, cannot("images.%s", list)
	}
	registry := atom("cel.bind(first, container.image.split('/')[0], container.image.contains('/') && (first.contains('.') || first.contains(':') || first == 'localhost') ? first : 'docker.io')")
	return jmesValue{e: macro(containers, "map", "container", registry), list: true, elemStr: true}, nil
}

// multiSelectHash converts {a: x, b: y} to a CEL map. JMESPath sets a
// missing value to null; the map leaves its key out ({?'a': x.?f}),
// which the paths that read it next (a.?f || default) read the same.
func (s *jmesScope) multiSelectHash(n gojmespath.ASTNode, cur *jmesValue) (jmesValue, error) {
	var entries []string
	for _, kv := range n.Children {
		key, ok := kv.Value.(string)
		if kv.NodeType != gojmespath.ASTKeyValPair || !ok || len(kv.Children) != 1 {
			return jmesValue{}, cannot("multi-select hash entry %s", kv.NodeType)
		}
		v, err := s.node(kv.Children[0], cur, true)
		if err != nil {
			return jmesValue{}, err
		}
		if isOptional(v.e) {
			entries = append(entries, "?"+str(key).s+": "+v.e.s)
		} else {
			entries = append(entries, str(key).s+": "+v.e.s)
		}
	}
	return jmesValue{e: atom("{" + strings.Join(entries, ", ") + "}")}, nil
}

// orExpression converts a || b. JMESPath returns b when a is missing or
// empty; the converter handles a default for a missing path, the empty
// list after a projection, and the default of a request field.
func (s *jmesScope) orExpression(n gojmespath.ASTNode, cur *jmesValue, optional bool) (jmesValue, error) {
	left, err := s.node(n.Children[0], cur, true)
	if err != nil {
		return jmesValue{}, err
	}
	right, err := s.node(n.Children[1], cur, optional)
	if err != nil {
		return jmesValue{}, err
	}
	emptyList := right.hasLit && (isEmptyList(right.lit) || left.list && right.lit == "")
	switch {
	case left.boolean && right.boolean:
		return jmesValue{e: or(left.e, right.e), boolean: true}, nil
	case strings.HasPrefix(left.e.s, "request.") && !strings.Contains(left.e.s, "(") && right.hasLit:
		if fb, ok := right.lit.(string); ok {
			left.fallback = &fb
			return left, nil
		}
	case emptyList && left.list && (left.projected || strings.HasSuffix(left.e.s, ")")):
		// A projection or filter is never missing: at worst empty.
		return left, nil
	case isOptional(left.e):
		if left.list && right.hasLit && (right.lit == "" || emptyList) {
			return jmesValue{e: call(left.e, "orValue", atom("[]")), list: true}, nil
		}
		return jmesValue{e: call(left.e, "orValue", right.e), list: left.list && right.list}, nil
	}
	return jmesValue{}, cannot("|| with a default on a value that is not a path")
}

func isEmptyList(v any) bool {
	l, ok := v.([]any)
	return ok && len(l) == 0
}

// isAlwaysThere says whether a projected field is one every element has
// (a container's name and image).
func isAlwaysThere(chain []any) bool {
	return len(chain) == 1 && (chain[0] == "name" || chain[0] == "image")
}

func (s *jmesScope) function(n gojmespath.ASTNode, cur *jmesValue) (jmesValue, error) {
	name := toString(n.Value)
	args := make([]jmesValue, len(n.Children))
	for i, c := range n.Children {
		// A function reads a missing list as null: its projections
		// project nothing.
		projection := c.NodeType == gojmespath.ASTProjection || c.NodeType == gojmespath.ASTFlatten || c.NodeType == gojmespath.ASTFilterProjection
		v, err := s.node(c, cur, projection)
		if err != nil {
			return jmesValue{}, err
		}
		if isOptional(v.e) {
			// A function reads a missing key as null.
			if v.list {
				v.e = call(v.e, "orValue", atom("[]"))
			} else {
				v.e = call(v.e, "orValue", atom("null"))
			}
		}
		args[i] = v
	}
	arity := func(k int) error {
		if len(args) != k {
			return cannot("%s with %d arguments", name, len(args))
		}
		return nil
	}
	switch name {
	case "length":
		if err := arity(1); err != nil {
			return jmesValue{}, err
		}
		return jmesValue{e: fn("size", orEmpty(args[0]))}, nil
	case "starts_with", "ends_with":
		if err := arity(2); err != nil {
			return jmesValue{}, err
		}
		m := map[string]string{"starts_with": "startsWith", "ends_with": "endsWith"}[name]
		return jmesValue{e: call(args[0].e, m, args[1].e), boolean: true}, nil
	case "contains":
		if err := arity(2); err != nil {
			return jmesValue{}, err
		}
		if args[0].list {
			return jmesValue{e: rel(args[1].e, "in", args[0].e), boolean: true}, nil
		}
		if args[0].str {
			return jmesValue{e: call(args[0].e, "contains", args[1].e), boolean: true}, nil
		}
		return jmesValue{}, cannot("contains on a value that may be a string or a list")
	case "to_string":
		if err := arity(1); err != nil {
			return jmesValue{}, err
		}
		return jmesValue{e: fn("string", args[0].e), str: true}, nil
	case "to_upper", "to_lower":
		if err := arity(1); err != nil {
			return jmesValue{}, err
		}
		return jmesValue{e: call(args[0].e, map[string]string{"to_upper": "upperAscii", "to_lower": "lowerAscii"}[name]), str: true}, nil
	case "keys":
		if err := arity(1); err != nil {
			return jmesValue{}, err
		}
		return jmesValue{e: macro(args[0].e, "map", "key", atom("key")), list: true, elemStr: true}, nil
	case "sort":
		if err := arity(1); err != nil {
			return jmesValue{}, err
		}
		return jmesValue{e: call(args[0].e, "sort"), list: true}, nil
	case "split":
		if err := arity(2); err != nil {
			return jmesValue{}, err
		}
		return jmesValue{e: call(args[0].e, "split", args[1].e), list: true, elemStr: true}, nil
	case "to_array":
		if err := arity(1); err != nil {
			return jmesValue{}, err
		}
		if args[0].list {
			return args[0], nil
		}
		return jmesValue{e: atom("[" + args[0].e.s + "]"), list: true}, nil
	case "label_match":
		// label_match(selector, labels): every key of the selector is a
		// label with its value.
		if err := arity(2); err != nil {
			return jmesValue{}, err
		}
		sel, labels := args[0].e, args[1].e
		return jmesValue{e: macro(sel, "all", "key", and(rel(atom("key"), "in", labels), rel(atom(labels.at(precAtom)+"[key]"), "==", atom(sel.at(precAtom)+"[key]")))), boolean: true}, nil
	case "regex_match":
		if err := arity(2); err != nil {
			return jmesValue{}, err
		}
		return jmesValue{e: call(fn("string", args[1].e), "matches", args[0].e), boolean: true}, nil
	}
	return jmesValue{}, cannot("function %s()", name)
}

// orEmpty gives an optional list a default, as length() of a missing
// key is an error in Kyverno only at the top level.
func orEmpty(v jmesValue) expr {
	if isOptional(v.e) {
		return call(v.e, "orValue", atom("[]"))
	}
	return v.e
}

// isOptional reports whether e is an optional path (a.?b, a[?'b']) that
// still needs its orValue().
func isOptional(e expr) bool {
	return (strings.Contains(e.s, ".?") || strings.Contains(e.s, "[?")) && !strings.HasSuffix(e.s, ")")
}
