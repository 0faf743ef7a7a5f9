package server

import (
	"encoding/json"
	"strconv"
	"sync"
	"unicode/utf8"
)

// jsonValues decodes JSON into the values encoding/json gives an `any`
// (map[string]any, []any, string, float64, bool, nil), about three times
// faster and with fewer allocations: no reflection, no byte-by-byte state
// machine, and the object keys Kubernetes objects repeat are shared
// instead of allocated for every request.
//
// It never disagrees with encoding/json: it gives up (ok false) on
// anything it does not handle exactly as encoding/json does, and the
// caller then decodes with encoding/json, which also words the error of a
// malformed body. It gives up on every syntax error, on numbers float64
// cannot hold, on nesting deeper than maxJSONDepth and on duplicate keys
// (which encoding/json merges when they fall on a struct field). Strings
// with escapes or invalid UTF-8 are unquoted by encoding/json itself.
type jsonValues struct {
	data []byte
	pos  int
	// depth is the nesting of the value being decoded.
	depth int
	// members is the stack of the members of the objects being decoded.
	members []member
}

// maxJSONDepth is far deeper than any Kubernetes object and far below
// encoding/json's own limit, which bounds the recursion here.
const maxJSONDepth = 500

// memberStacks recycles the members stacks of decoders across requests.
var memberStacks = sync.Pool{New: func() any { s := make([]member, 0, 64); return &s }}

// newJSONValues returns a decoder of data; release it when done.
func newJSONValues(data []byte) *jsonValues {
	return &jsonValues{data: data, members: (*memberStacks.Get().(*[]member))[:0]}
}

func (d *jsonValues) release() {
	if cap(d.members) <= 4096 {
		s := d.members[:0]
		memberStacks.Put(&s)
	}
	d.members = nil
}

// decodeJSONValue decodes data, which must hold one JSON value.
func decodeJSONValue(data []byte) (any, bool) {
	d := newJSONValues(data)
	defer d.release()
	v, ok := d.value()
	if !ok {
		return nil, false
	}
	d.skipSpace()
	return v, d.pos == len(d.data)
}

func (d *jsonValues) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *jsonValues) value() (any, bool) {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		m, ok := d.object()
		return m, ok
	case c == '[':
		a, ok := d.array()
		return a, ok
	case c == '"':
		if v, ok := d.sharedValue(); ok {
			return v, true
		}
		s, ok := d.str(false)
		return s, ok
	case c == '-' || c >= '0' && c <= '9':
		f, ok := d.number()
		return f, ok
	case d.literal("true"):
		return true, true
	case d.literal("false"):
		return false, true
	case d.literal("null"):
		return nil, true
	}
	return nil, false
}

func (d *jsonValues) literal(word string) bool {
	if len(d.data)-d.pos >= len(word) && string(d.data[d.pos:d.pos+len(word)]) == word {
		d.pos += len(word)
		return true
	}
	return false
}

func (d *jsonValues) object() (map[string]any, bool) {
	if d.depth++; d.depth > maxJSONDepth {
		return nil, false
	}
	defer func() { d.depth-- }()
	d.pos++ // {
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return map[string]any{}, true
	}
	// The members are gathered on a stack shared by the nested objects,
	// so the map is made at its final size: a growing map leaves its
	// smaller tables behind as garbage.
	base := len(d.members)
	defer func() {
		clear(d.members[base:]) // let the values go
		d.members = d.members[:base]
	}()
	for {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, false
		}
		k, ok := d.str(true)
		if !ok {
			return nil, false
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, false
		}
		d.pos++
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		d.members = append(d.members, member{k, v})
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, false
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			continue
		case '}':
			d.pos++
		default:
			return nil, false
		}
		members := d.members[base:]
		m := make(map[string]any, len(members))
		for _, kv := range members {
			m[kv.key] = kv.value
		}
		if len(m) != len(members) {
			return nil, false // a duplicate key
		}
		return m, true
	}
}

// member is a key and value of an object being decoded.
type member struct {
	key   string
	value any
}

func (d *jsonValues) array() ([]any, bool) {
	if d.depth++; d.depth > maxJSONDepth {
		return nil, false
	}
	defer func() { d.depth-- }()
	d.pos++ // [
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return []any{}, true
	}
	// The elements wait on the members stack, as an object's members do,
	// so the slice is made once at its final size.
	base := len(d.members)
	defer func() {
		clear(d.members[base:])
		d.members = d.members[:base]
	}()
	for {
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		d.members = append(d.members, member{value: v})
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, false
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			elements := d.members[base:]
			a := make([]any, len(elements))
			for i := range elements {
				a[i] = elements[i].value
			}
			return a, true
		default:
			return nil, false
		}
	}
}

// str decodes the string at d.pos (its opening quote). Keys Kubernetes
// objects repeat are returned shared when key is true.
func (d *jsonValues) str(key bool) (string, bool) {
	start := d.pos + 1
	simple := true
	i := start
	for ; i < len(d.data); i++ {
		c := d.data[i]
		if c == '"' {
			break
		}
		if c < 0x20 {
			return "", false // control characters must be escaped
		}
		if c == '\\' {
			simple = false
			i++ // skip the escaped character; encoding/json checks it below
			continue
		}
		if c >= utf8.RuneSelf {
			simple = false
		}
	}
	if i >= len(d.data) {
		return "", false
	}
	d.pos = i + 1
	raw := d.data[start:i]
	if simple {
		if key {
			if k, ok := sharedKeys[string(raw)]; ok {
				return k, true
			}
		}
		return string(raw), true
	}
	if !hasEscape(raw) && utf8.Valid(raw) {
		return string(raw), true
	}
	// Escapes and invalid UTF-8 are rare; encoding/json unquotes them
	// exactly as it would have.
	var s string
	if err := json.Unmarshal(d.data[start-1:i+1], &s); err != nil {
		return "", false
	}
	return s, true
}

func hasEscape(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// number decodes a number as encoding/json does into an `any`: a float64
// parsed from the literal, which must follow JSON's grammar.
func (d *jsonValues) number() (float64, bool) {
	start := d.pos
	i := d.pos
	n := len(d.data)
	if i < n && d.data[i] == '-' {
		i++
	}
	switch {
	case i < n && d.data[i] == '0':
		i++
	case i < n && d.data[i] >= '1' && d.data[i] <= '9':
		for i < n && d.data[i] >= '0' && d.data[i] <= '9' {
			i++
		}
	default:
		return 0, false
	}
	if i < n && d.data[i] == '.' {
		i++
		if i >= n || d.data[i] < '0' || d.data[i] > '9' {
			return 0, false
		}
		for i < n && d.data[i] >= '0' && d.data[i] <= '9' {
			i++
		}
	}
	if i < n && (d.data[i] == 'e' || d.data[i] == 'E') {
		i++
		if i < n && (d.data[i] == '+' || d.data[i] == '-') {
			i++
		}
		if i >= n || d.data[i] < '0' || d.data[i] > '9' {
			return 0, false
		}
		for i < n && d.data[i] >= '0' && d.data[i] <= '9' {
			i++
		}
	}
	f, err := strconv.ParseFloat(string(d.data[start:i]), 64)
	if err != nil {
		return 0, false // out of range: encoding/json refuses it
	}
	d.pos = i
	return f, true
}

// sharedValue returns, for the plain string at d.pos that is one of
// sharedValues, its shared interface value: a string decoded into an
// `any` is two allocations (its bytes and the interface's copy of its
// header), and a Pod the API server defaulted holds a dozen such values.
func (d *jsonValues) sharedValue() (any, bool) {
	start := d.pos + 1
	end := start
	for end < len(d.data) && end-start <= maxSharedValue {
		switch c := d.data[end]; {
		case c == '"':
			v, ok := sharedValues[string(d.data[start:end])]
			if ok {
				d.pos = end + 1
			}
			return v, ok
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return nil, false
		}
		end++
	}
	return nil, false
}

// sharedValues are string values Kubernetes objects repeat (API versions,
// kinds, the values of the enumerations the API server defaults), boxed
// once for the process; maxSharedValue is the longest.
var sharedValues, maxSharedValue = func() (map[string]any, int) {
	values := []string{
		"", "v1", "apps/v1", "batch/v1", "Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job",
		"CronJob", "ReplicationController", "Service", "ConfigMap", "Secret", "Namespace", "ServiceAccount",
		"TCP", "UDP", "SCTP", "Always", "IfNotPresent", "Never", "OnFailure", "File", "FallbackToLogsOnError",
		"/dev/termination-log", "ClusterFirst", "ClusterFirstWithHostNet", "Default", "None", "default-scheduler",
		"default", "RuntimeDefault", "Unconfined", "Localhost", "ALL", "NET_BIND_SERVICE", "PreemptLowerPriority",
		"Exists", "Equal", "NoSchedule", "NoExecute", "PreferNoSchedule", "node.kubernetes.io/not-ready",
		"node.kubernetes.io/unreachable", "kube-api-access", "kube-root-ca.crt", "ca.crt", "namespace",
		"metadata.namespace", "token", "Update", "Apply", "FieldsV1", "BestEffort", "Burstable", "Guaranteed",
		"Pending", "Running", "RollingUpdate", "25%", "Retain", "Delete", "Orphan", "OrderedReady", "Parallel",
		"NonIndexed", "Indexed", "Forbid", "Allow", "Replace", "MustRunAsNonRoot", "RunAsAny",
	}
	m := make(map[string]any, len(values))
	longest := 0
	for _, v := range values {
		m[v] = v
		longest = max(longest, len(v))
	}
	return m, longest
}()

// sharedKeys are the object keys of admission reviews and the Pods,
// workloads and their templates they carry; each is allocated once for
// the process instead of once per occurrence per request.
var sharedKeys = func() map[string]string {
	keys := []string{
		// AdmissionReview
		"apiVersion", "kind", "request", "uid", "resource", "subResource", "requestKind", "requestResource",
		"requestSubResource", "name", "namespace", "operation", "userInfo", "username", "groups", "extra",
		"object", "oldObject", "dryRun", "options", "group", "version",
		// metadata
		"metadata", "labels", "annotations", "creationTimestamp", "generateName", "generation",
		"resourceVersion", "ownerReferences", "managedFields", "finalizers", "deletionTimestamp",
		"controller", "blockOwnerDeletion", "manager", "fieldsType", "fieldsV1", "time",
		// workloads
		"spec", "status", "replicas", "selector", "matchLabels", "matchExpressions", "template",
		"strategy", "jobTemplate", "schedule", "key", "operator", "values",
		// Pod spec
		"containers", "initContainers", "ephemeralContainers", "volumes", "image", "imagePullPolicy",
		"command", "args", "env", "envFrom", "value", "valueFrom", "ports", "containerPort", "protocol",
		"hostPort", "hostIP", "resources", "limits", "requests", "cpu", "memory", "volumeMounts",
		"mountPath", "readOnly", "securityContext", "privileged", "allowPrivilegeEscalation",
		"readOnlyRootFilesystem", "runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup",
		"supplementalGroups", "capabilities", "add", "drop", "seccompProfile", "type",
		"localhostProfile", "seLinuxOptions", "appArmorProfile", "procMount", "windowsOptions",
		"sysctls", "hostNetwork", "hostPID", "hostIPC", "hostUsers", "serviceAccountName",
		"automountServiceAccountToken", "nodeSelector", "nodeName", "tolerations", "effect",
		"affinity", "restartPolicy", "dnsPolicy", "schedulerName", "terminationGracePeriodSeconds",
		"terminationMessagePath", "terminationMessagePolicy", "priority", "enableServiceLinks",
		"preemptionPolicy", "livenessProbe", "readinessProbe", "startupProbe", "httpGet", "path",
		"port", "tcpSocket", "exec", "emptyDir", "hostPath", "configMap", "secret", "secretName",
		"persistentVolumeClaim", "claimName", "projected", "sources", "downwardAPI", "items",
		"serviceAccountToken", "expirationSeconds", "fieldRef", "fieldPath", "defaultMode",
		"conditions", "phase", "qosClass",
	}
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k] = k
	}
	return m
}()
