package cpol

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/jmespath"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/podimages"
)

// defaultExtractorName is the images.<name> entry of a custom extractor
// that names none (verify-images.md §2.3).
const defaultExtractorName = "custom"

// imageExtractor is one compiled entry of a rule's imageExtractors: where
// in an object of its kind the images are.
type imageExtractor struct {
	// fields lead to the objects holding the image; "*" expands every
	// element of a list or value of a map.
	fields []string
	// value is the field of those objects holding the image.
	value string
	// key is the field naming each image in images.<name>; when empty the
	// image's JSON pointer names it.
	key string
	// name is the images.<name> entry.
	name string
	// transform, when set, turns the raw string into the image reference.
	transform *jmespath.Query
}

// compileImageExtractors compiles a rule's imageExtractors, by kind. The
// path splits on "/"; without a value its last segment is the value
// (Kyverno's lookupImageExtractor). A kind with an empty list is kept:
// it fails at evaluation with Kyverno's "no extractors found for <Kind>".
func (s *Compiler) compileImageExtractors(r *kyvernov1.Rule, path string, f *fault.Collector) map[string][]imageExtractor {
	if len(r.ImageExtractors) == 0 {
		return nil
	}
	out := make(map[string][]imageExtractor, len(r.ImageExtractors))
	for _, kind := range slices.Sorted(maps.Keys(r.ImageExtractors)) {
		list := make([]imageExtractor, 0, len(r.ImageExtractors[kind]))
		for i, c := range r.ImageExtractors[kind] {
			ep := fmt.Sprintf("%s.imageExtractors.%s[%d]", path, kind, i)
			var fields []string
			for _, seg := range strings.Split(c.Path, "/") {
				if seg = strings.TrimSpace(seg); seg != "" {
					fields = append(fields, seg)
				}
			}
			x := imageExtractor{fields: fields, value: c.Value, key: c.Key, name: c.Name}
			if x.name == "" {
				x.name = defaultExtractorName
			}
			if x.value == "" {
				if len(fields) == 0 {
					f.Add(ep+".path", fmt.Sprintf("rule %q, kind %s: path %q names no field holding the image", r.Name, kind, c.Path))
					continue
				}
				x.value, x.fields = fields[len(fields)-1], fields[:len(fields)-1]
			}
			if x.value == "*" {
				f.Add(ep+".path", fmt.Sprintf("rule %q, kind %s: path %q ends in * and no value names the field holding the image", r.Name, kind, c.Path))
				continue
			}
			if c.JMESPath != "" {
				q, err := s.JP.Compile(c.JMESPath)
				if err != nil {
					f.Add(ep+".jmesPath", fmt.Sprintf("rule %q, kind %s: invalid jmesPath %q: %v", r.Name, kind, c.JMESPath, unwrapCompile(err)))
					continue
				}
				x.transform = q
			}
			list = append(list, x)
		}
		out[kind] = list
	}
	return out
}

// extractorsFailed starts the error of a rule whose custom extractors
// cannot read the object.
const extractorsFailed = "failed to extract images"

// imagesDocument returns base, or for a verifyImages rule with custom
// extractors of the request object's kind a child of it whose images
// entry is what they find: images.<name>.<key>, in place of the standard
// containers/initContainers/ephemeralContainers, as Kyverno does before
// loading the rule's context (so context entries and preconditions see
// them). Unlike Kyverno, the entry is the rule's own: the next rule does
// not inherit it.
func (ev *evaluation) imagesDocument(base *jsoncontext.Document, r *rule) (*jsoncontext.Document, error) {
	if r.verify == nil || len(r.verify.extractors) == 0 {
		return base, nil
	}
	obj := ev.in.Req.Object
	if obj == nil {
		// DELETE: no image is verified, none is read.
		return base, nil
	}
	kind, _ := obj["kind"].(string)
	if _, ok := r.verify.extractors[kind]; !ok {
		return base, nil
	}
	found, err := r.verify.images(obj)
	if err != nil {
		return nil, err
	}
	doc := base.Child()
	doc.SetRoot("images", found.context)
	return doc, nil
}

// ruleImages are the images a verifyImages rule looks at in an object.
type ruleImages struct {
	// list is every image found, in extraction order, duplicates
	// included: each is verified.
	list []podimages.PodImage
	// pullSecrets are the names of the Pod spec's imagePullSecrets
	// (standard extractors only).
	pullSecrets []string
	// context is images.<name>.<key> for a rule with custom extractors
	// of the object's kind; nil when the standard images apply.
	context map[string]any
}

// images returns the images the rule's extractors find in obj: the
// custom extractors of obj's kind when the rule has them (they replace
// the standard ones), else the Pod spec's containers, initContainers and
// ephemeralContainers.
func (v *verifyImagesRule) images(obj map[string]any) (ruleImages, error) {
	kind, _ := obj["kind"].(string)
	extractors, custom := v.extractors[kind]
	if !custom {
		list, secrets := podimages.Of(obj)
		return ruleImages{list: list, pullSecrets: secrets}, nil
	}
	if len(extractors) == 0 {
		return ruleImages{}, fmt.Errorf("no extractors found for %s", kind)
	}
	out := ruleImages{context: map[string]any{}}
	for i := range extractors {
		x := &extractors[i]
		byKey := map[string]any{}
		err := x.extract(obj, nil, x.fields, func(found podimages.PodImage, key string) {
			out.list = append(out.list, found)
			byKey[key] = found.Info.Map()
		})
		if err != nil {
			return ruleImages{}, fmt.Errorf("imageExtractors.%s[%d]: %w", kind, i, err)
		}
		if len(byKey) == 0 {
			continue
		}
		// Extractors sharing a name share the entry, as in Kyverno.
		if prev, ok := out.context[x.name].(map[string]any); ok {
			for k, val := range byKey {
				prev[k] = val
			}
			continue
		}
		out.context[x.name] = byKey
	}
	return out, nil
}

// extract walks fields from v, whose path in the object is at, and calls
// found for every image under them. Maps are expanded in key order, so
// the result does not depend on map iteration. A missing field means no
// image; a field of the wrong shape is an error, as in Kyverno, so that a
// policy never passes an object it could not read.
func (x *imageExtractor) extract(v any, at []string, fields []string, found func(podimages.PodImage, string)) error {
	if v == nil {
		return nil
	}
	if len(fields) > 0 && fields[0] == "*" {
		switch t := v.(type) {
		case []any:
			for i, e := range t {
				if err := x.extract(e, append(at, strconv.Itoa(i)), fields[1:], found); err != nil {
					return err
				}
			}
		case map[string]any:
			// Sized up front: this runs per request.
			keys := slices.AppendSeq(make([]string, 0, len(t)), maps.Keys(t))
			slices.Sort(keys)
			for _, k := range keys {
				if err := x.extract(t[k], append(at, k), fields[1:], found); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("%s is %s, not a list or map that * can expand", podimages.JSONPointer(at), jsoncontext.KindOf(v))
		}
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s is %s, not an object", podimages.JSONPointer(at), jsoncontext.KindOf(v))
	}
	if len(fields) > 0 {
		return x.extract(m[fields[0]], append(at, fields[0]), fields[1:], found)
	}
	at = append(at[:len(at):len(at)], x.value)
	pointer := podimages.JSONPointer(at)
	var raw string
	switch v := m[x.value].(type) {
	case nil:
		// No image here (Kyverno: "the image may not be present").
		return nil
	case string:
		raw = v
	default:
		// Kyverno skips it as absent; an extractor pointed at an object
		// (image: {repository, tag}) would then pass what it never read.
		return fmt.Errorf("%s is %s, not a string image reference", pointer, jsoncontext.KindOf(v))
	}
	if raw == "" {
		return nil
	}
	key := pointer
	if x.key != "" {
		if key, ok = m[x.key].(string); !ok {
			return fmt.Errorf("%s: key %q is not a string field of the object holding the image", pointer, x.key)
		}
	}
	image := raw
	if x.transform != nil {
		out, err := x.transform.Search(raw)
		if err != nil {
			return fmt.Errorf("%s: failed to apply jmesPath %s to %q: %v", pointer, x.transform.Expression(), raw, err)
		}
		if image, ok = out.(string); !ok {
			return fmt.Errorf("%s: jmesPath %s must produce a string, but produced %v", pointer, x.transform.Expression(), out)
		}
	}
	info, ok := jsoncontext.ParseImage(image)
	if !ok {
		return fmt.Errorf("%s: invalid image %q", pointer, image)
	}
	found(podimages.PodImage{Pointer: pointer, Info: info, Raw: raw, Transformed: x.transform != nil}, key)
	return nil
}
