package jsoncontext

import (
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// RequestInfo is what the request.* part of the document is built from.
type RequestInfo struct {
	Operation   string
	Object      map[string]any
	OldObject   map[string]any
	Namespace   string
	Name        string
	Kind        map[string]any // {group, version, kind}
	SubResource string
	UserInfo    authenticationv1.UserInfo
	Roles       []string
	// ClusterRoles bound to the user.
	ClusterRoles []string
	DryRun       bool
}

// RequestDocument returns the top-level entries Kyverno provides for every
// rule: request (object, oldObject, operation, userInfo, roles,
// clusterRoles, namespace, name, kind, subResource, dryRun),
// serviceAccountName and serviceAccountNamespace (from a service account
// user name), and images (see Images).
//
// On DELETE there is no new object, and request.object refers to the old
// one, as Kyverno rewrites request.object to request.oldObject there.
func RequestDocument(r RequestInfo) map[string]any {
	root := requestRoot(r)
	if images := requestImages(r); images != nil {
		root["images"] = images
	}
	return root
}

// NewRequest returns the document of RequestDocument, evaluated by q, with
// its images worked out only if a read may see them (Document.Lazy).
func NewRequest(q Querier, r RequestInfo) *Document {
	d := New(q, requestRoot(r))
	// The closure keeps the object only, not a copy of all of r.
	object := requestObject(r)
	d.Lazy("images", func() any {
		if object == nil {
			return nil
		}
		if images := Images(object); images != nil {
			return images
		}
		return nil
	})
	return d
}

// requestObject is the object the request is about: the old one on DELETE.
func requestObject(r RequestInfo) map[string]any {
	if r.Object == nil && r.Operation == "DELETE" {
		return r.OldObject
	}
	return r.Object
}

func requestImages(r RequestInfo) map[string]any {
	object := requestObject(r)
	if object == nil {
		return nil
	}
	return Images(object)
}

// requestRoot is RequestDocument without images.
func requestRoot(r RequestInfo) map[string]any {
	object := requestObject(r)
	request := map[string]any{
		"operation":    operation(r.Operation),
		"object":       jsonOrNil(object),
		"oldObject":    jsonOrNil(r.OldObject),
		"namespace":    r.Namespace,
		"name":         r.Name,
		"userInfo":     userInfo(r.UserInfo),
		"roles":        stringList(r.Roles),
		"clusterRoles": stringList(r.ClusterRoles),
		"dryRun":       r.DryRun,
	}
	if r.Kind != nil {
		request["kind"] = r.Kind
	}
	if r.SubResource != "" {
		request["subResource"] = r.SubResource
	}
	saName, saNamespace := serviceAccount(r.UserInfo.Username)
	root := map[string]any{
		"request":                 request,
		"serviceAccountName":      saName,
		"serviceAccountNamespace": saNamespace,
	}
	return root
}

func jsonOrNil(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

// operation is the request's operation as the document holds it: the
// four the API server sends are boxed once, not for every review.
func operation(op string) any {
	switch op {
	case "CREATE":
		return opCreate
	case "UPDATE":
		return opUpdate
	case "DELETE":
		return opDelete
	case "CONNECT":
		return opConnect
	}
	return op
}

var opCreate, opUpdate, opDelete, opConnect any = "CREATE", "UPDATE", "DELETE", "CONNECT"

// emptyList is the document's empty list (no roles, no groups), shared:
// appending to it makes a new one.
var emptyList any = []any{}

func stringList(s []string) any {
	if len(s) == 0 {
		return emptyList
	}
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func userInfo(u authenticationv1.UserInfo) map[string]any {
	m := map[string]any{"username": u.Username}
	if u.UID != "" {
		m["uid"] = u.UID
	}
	if len(u.Groups) > 0 {
		m["groups"] = stringList(u.Groups)
	}
	if len(u.Extra) > 0 {
		extra := make(map[string]any, len(u.Extra))
		for k, v := range u.Extra {
			extra[k] = stringList(v)
		}
		m["extra"] = extra
	}
	return m
}

// serviceAccount splits "system:serviceaccount:<namespace>:<name>"; other
// user names give empty strings.
func serviceAccount(username string) (name, namespace string) {
	const prefix = "system:serviceaccount:"
	rest, ok := strings.CutPrefix(username, prefix)
	if !ok {
		return "", ""
	}
	namespace, name, ok = strings.Cut(rest, ":")
	if !ok {
		return "", ""
	}
	return name, namespace
}
