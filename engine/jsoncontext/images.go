package jsoncontext

import (
	"strings"
)

// DefaultRegistry is added to image references that name no registry.
const DefaultRegistry = "docker.io"

// containerLists are the container lists the images entry describes.
var containerLists = []string{"containers", "initContainers", "ephemeralContainers"}

// Images returns the images entry of the document for an object that holds
// a Pod spec (a Pod, a Pod template under spec.template, or a CronJob's
// spec.jobTemplate.spec.template):
//
//	{containers: {<container name>: {registry, path, name, tag, digest,
//	  reference, referenceWithTag}}, initContainers: {...}, ephemeralContainers: {...}}
//
// It returns nil when the object has no containers. Images that do not parse
// are left out.
func Images(obj map[string]any) map[string]any {
	spec := podSpec(obj)
	if spec == nil {
		return nil
	}
	var out map[string]any
	for _, list := range containerLists {
		containers, _ := spec[list].([]any)
		if len(containers) == 0 {
			continue
		}
		byName := make(map[string]any, len(containers))
		for _, c := range containers {
			cm, _ := c.(map[string]any)
			name, _ := cm["name"].(string)
			image, _ := cm["image"].(string)
			if image == "" {
				continue
			}
			if info, ok := ParseImage(image); ok {
				byName[name] = info.Map()
			}
		}
		if out == nil {
			out = make(map[string]any, len(containerLists))
		}
		out[list] = byName
	}
	return out
}

// PodSpecPrefix is where the Pod spec of a kind lives (verify-images.md
// §2.3): its JSON pointer and its path of keys; none for a kind without
// one.
func PodSpecPrefix(kind string) (string, []string) {
	switch kind {
	case "Pod":
		return "/spec", []string{"spec"}
	case "CronJob":
		return "/spec/jobTemplate/spec/template/spec", []string{"spec", "jobTemplate", "spec", "template", "spec"}
	case "Deployment", "DaemonSet", "ReplicaSet", "ReplicationController", "StatefulSet", "Job":
		return "/spec/template/spec", []string{"spec", "template", "spec"}
	}
	return "", nil
}

// PodSpecAt returns the Pod spec of obj where PodSpecPrefix says it lives,
// and its JSON pointer; nil when obj has none.
func PodSpecAt(obj map[string]any) (string, map[string]any) {
	kind, _ := obj["kind"].(string)
	prefix, path := PodSpecPrefix(kind)
	if path == nil {
		return "", nil
	}
	spec := obj
	for _, k := range path {
		if spec, _ = spec[k].(map[string]any); spec == nil {
			return "", nil
		}
	}
	return prefix, spec
}

// PullSecrets lists the names of a Pod spec's imagePullSecrets.
func PullSecrets(spec map[string]any) []string {
	var secrets []string
	list, _ := spec["imagePullSecrets"].([]any)
	for _, s := range list {
		if m, ok := s.(map[string]any); ok {
			if n, _ := m["name"].(string); n != "" {
				secrets = append(secrets, n)
			}
		}
	}
	return secrets
}

func podSpec(obj map[string]any) map[string]any {
	spec, _ := obj["spec"].(map[string]any)
	if spec == nil {
		return nil
	}
	kind, _ := obj["kind"].(string)
	switch {
	case kind == "Pod":
		return spec
	case kind == "CronJob":
		return dig(spec, "jobTemplate", "spec", "template", "spec")
	default:
		if s := dig(spec, "template", "spec"); s != nil {
			return s
		}
		return spec
	}
}

func dig(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		next, _ := m[k].(map[string]any)
		if next == nil {
			return nil
		}
		m = next
	}
	return m
}

// ImageInfo is a parsed image reference, as Kyverno describes it.
type ImageInfo struct {
	// Registry is the registry host, docker.io when the reference has none.
	Registry string
	// Path is the repository path inside the registry ("library/nginx").
	Path string
	// Name is the last element of Path.
	Name string
	// Tag is the tag, "latest" when the reference has neither tag nor digest.
	Tag string
	// Digest is the digest ("sha256:..."), if any.
	Digest string
}

// Reference is registry/path followed by @digest, or :tag when there is no
// digest.
func (i ImageInfo) Reference() string {
	if i.Digest != "" {
		return i.Registry + "/" + i.Path + "@" + i.Digest
	}
	return i.ReferenceWithTag()
}

// ReferenceWithTag is registry/path:tag.
func (i ImageInfo) ReferenceWithTag() string {
	return i.Registry + "/" + i.Path + ":" + i.Tag
}

// Map returns the document form of the image.
func (i ImageInfo) Map() map[string]any {
	withTag := i.ReferenceWithTag()
	reference := withTag // the same string when there is no digest
	if i.Digest != "" {
		reference = i.Reference()
	}
	return map[string]any{
		"registry":         i.Registry,
		"path":             i.Path,
		"name":             i.Name,
		"tag":              i.Tag,
		"digest":           i.Digest,
		"reference":        reference,
		"referenceWithTag": withTag,
	}
}

// ParseImage parses an image reference such as nginx, nginx:1.25,
// ghcr.io/org/app@sha256:..., or localhost:5000/app:v1. The first path
// element is a registry only when it holds a "." or a ":" or is localhost;
// otherwise docker.io is assumed (no "library/" is added, as in Kyverno).
func ParseImage(image string) (ImageInfo, bool) {
	var info ImageInfo
	rest := image
	if at := strings.Index(rest, "@"); at >= 0 {
		info.Digest = rest[at+1:]
		rest = rest[:at]
		if info.Digest == "" {
			return ImageInfo{}, false
		}
	}
	// A tag follows the last ":" that comes after the last "/".
	if colon := strings.LastIndex(rest, ":"); colon > strings.LastIndex(rest, "/") {
		info.Tag = rest[colon+1:]
		rest = rest[:colon]
		if info.Tag == "" {
			return ImageInfo{}, false
		}
	}
	first, remainder, hasSlash := strings.Cut(rest, "/")
	if hasSlash && (strings.ContainsAny(first, ".:") || first == "localhost") {
		info.Registry, info.Path = first, remainder
	} else {
		info.Registry, info.Path = DefaultRegistry, rest
	}
	if info.Path == "" || strings.ContainsAny(info.Path, " \t") {
		return ImageInfo{}, false
	}
	info.Name = info.Path[strings.LastIndex(info.Path, "/")+1:]
	if info.Tag == "" && info.Digest == "" {
		info.Tag = "latest"
	}
	return info, true
}
