package cpol

import (
	"context"
	"fmt"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/loader"
)

// LoadContext evaluates context entries in order and stores each result
// in doc under its name; later entries see earlier ones. An entry that the
// Values hook pins (by its name or a dotted path inside it) is not loaded,
// unless it is a variable entry: Kyverno's CLI sets the values first and
// then still evaluates variable entries, which overwrite them.
func (ev *evaluation) loadContext(ctx context.Context, doc *jsoncontext.Document, r *rule, entries []kyvernov1.ContextEntry) error {
	return ev.loadEntries(ctx, doc, r, entries, nil)
}

// loadEntries is loadContext with the rule's foreachValues, for the
// entries of a foreach element: an entry they pin is not loaded either
// (pinElementValues sets it afterwards).
func (ev *evaluation) loadEntries(ctx context.Context, doc *jsoncontext.Document, r *rule, entries []kyvernov1.ContextEntry, perElement map[string][]any) error {
	pinned := ev.ruleValues(r)
	for i := range entries {
		e := &entries[i]
		if e.Variable == nil && (isPinned(pinned, e.Name) || isPinned(ev.resourceValues(), e.Name) || isPinned(perElement, e.Name)) {
			continue
		}
		v, err := ev.loadEntry(ctx, doc, e)
		if err != nil {
			return fmt.Errorf("context entry %q: %w", e.Name, err)
		}
		doc.Set(e.Name, v)
	}
	return nil
}

func (ev *evaluation) loadEntry(ctx context.Context, doc *jsoncontext.Document, e *kyvernov1.ContextEntry) (any, error) {
	l := ev.cfg.Loaders
	switch {
	case e.Variable != nil:
		return ev.loadVariable(doc, e.Variable)
	case e.ConfigMap != nil:
		if l.ConfigMaps == nil {
			return nil, fmt.Errorf("no ConfigMap loader to read ConfigMap %s/%s", e.ConfigMap.Namespace, e.ConfigMap.Name)
		}
		name, err := ev.substituteString(doc, e.ConfigMap.Name)
		if err != nil {
			return nil, err
		}
		ns, err := ev.substituteString(doc, e.ConfigMap.Namespace)
		if err != nil {
			return nil, err
		}
		if ns == "" {
			ns = "default"
		}
		if err := checkConfigMapRead(ev.readScope(), ns); err != nil {
			return nil, err
		}
		cm, err := l.ConfigMaps.ConfigMap(ctx, ns, name)
		if err != nil {
			return nil, fmt.Errorf("failed to get ConfigMap %s/%s: %w", ns, name, err)
		}
		return cm, nil
	case e.APICall != nil:
		return ev.loadAPICall(ctx, doc, e.APICall)
	case e.ImageRegistry != nil:
		if l.Images == nil {
			return nil, fmt.Errorf("no image registry access to read %q", e.ImageRegistry.Reference)
		}
		ref, err := ev.substituteString(doc, e.ImageRegistry.Reference)
		if err != nil {
			return nil, err
		}
		// The entry's credentials, with its secrets named in the
		// resource's namespace, as for verifyImages.
		creds := loader.ImageCredentials{Namespace: ev.in.Res.Namespace, Registry: e.ImageRegistry.ImageRegistryCredentials, Scope: ev.readScope()}
		data, err := l.Images.ImageData(ctx, ref, creds)
		if err != nil {
			return nil, fmt.Errorf("failed to fetch image data for %q: %w", ref, err)
		}
		return ev.applyJMESPath(doc, e.ImageRegistry.JMESPath, map[string]any(data))
	case e.GlobalReference != nil:
		// The name may hold variables, as Kyverno substitutes the whole
		// reference ("{{ request.namespace }}-quota").
		name, err := ev.substituteString(doc, e.GlobalReference.Name)
		if err != nil {
			return nil, err
		}
		if l.GlobalContext == nil {
			return nil, fmt.Errorf("no global context to read entry %q", name)
		}
		data, err := celruntime.ReadGlobalContext(ctx, l.GlobalContext, name, ev.readScope())
		if err != nil {
			return nil, fmt.Errorf("failed to read global context entry %q: %w", name, err)
		}
		return ev.applyJMESPath(doc, e.GlobalReference.JMESPath, data)
	}
	return nil, fmt.Errorf("no source set")
}

// loadVariable evaluates a variable entry: its value (with variables
// substituted), or its JMESPath applied to the value or, without a value,
// to the whole document; the default replaces a nil result or a failed
// expression.
func (ev *evaluation) loadVariable(doc *jsoncontext.Document, v *kyvernov1.Variable) (any, error) {
	value, err := kyvernov1.FromJSON(v.Value)
	if err != nil {
		return nil, err
	}
	if value != nil {
		if value, err = ev.substitute(doc, value, ""); err != nil {
			return nil, err
		}
	}
	def, err := kyvernov1.FromJSON(v.Default)
	if err != nil {
		return nil, err
	}
	if def != nil {
		if def, err = ev.substitute(doc, def, ""); err != nil {
			return nil, err
		}
	}
	out := value
	if v.JMESPath != "" {
		expr, err := ev.substituteString(doc, v.JMESPath)
		if err != nil {
			return nil, err
		}
		if value != nil {
			out, err = ev.env.JP.Search(expr, value)
		} else {
			out, err = doc.Query(expr)
		}
		if err != nil {
			if def != nil {
				return def, nil
			}
			return nil, fmt.Errorf("failed to evaluate JMESPath %q: %w", expr, err)
		}
	}
	if out == nil && def != nil {
		return def, nil
	}
	return out, nil
}

func (ev *evaluation) loadAPICall(ctx context.Context, doc *jsoncontext.Document, c *kyvernov1.ContextAPICall) (any, error) {
	if ev.cfg.Loaders.APICalls == nil {
		return nil, fmt.Errorf("no API access to call %q", c.URLPath)
	}
	call := loader.APICall{Method: string(c.Method)}
	if call.Method == "" {
		call.Method = string(kyvernov1.MethodGet)
	}
	var err error
	if call.URLPath, err = ev.substituteString(doc, c.URLPath); err != nil {
		return nil, err
	}
	if c.Service == nil || call.URLPath != "" {
		if err := checkAPIPathRead(ev.readScope(), call.URLPath); err != nil {
			return nil, err
		}
	}
	if c.Service != nil {
		if call.URL, err = ev.substituteString(doc, c.Service.URL); err != nil {
			return nil, err
		}
		call.CABundle = c.Service.CABundle
		// Whose call it is: the cluster's loaders refuse a namespaced
		// policy's service call unless the process allows it.
		call.Namespace = ev.readScope()
		for _, h := range c.Service.Headers {
			value, err := ev.substituteString(doc, h.Value)
			if err != nil {
				return nil, err
			}
			call.Headers = append(call.Headers, loader.APICallHeader{Key: h.Key, Value: value})
		}
	}
	if len(c.Data) > 0 {
		call.Data = make(map[string]any, len(c.Data))
		for _, d := range c.Data {
			v, err := kyvernov1.FromJSON(d.Value)
			if err != nil {
				return nil, err
			}
			if v, err = ev.substitute(doc, v, ""); err != nil {
				return nil, err
			}
			call.Data[d.Key] = v
		}
	}
	def, err := kyvernov1.FromJSON(c.Default)
	if err != nil {
		return nil, err
	}
	data, err := ev.cfg.Loaders.APICalls.Call(ctx, call)
	if err != nil {
		if def != nil {
			return def, nil
		}
		return nil, fmt.Errorf("failed to call %s %s: %w", call.Method, firstNonEmpty(call.URLPath, call.URL), err)
	}
	out, err := ev.applyJMESPath(doc, c.JMESPath, data)
	if err != nil && def != nil {
		return def, nil
	}
	return out, err
}

func (ev *evaluation) applyJMESPath(doc *jsoncontext.Document, expr string, data any) (any, error) {
	if expr == "" {
		return data, nil
	}
	expr, err := ev.substituteString(doc, expr)
	if err != nil {
		return nil, err
	}
	out, err := ev.env.JP.Search(expr, data)
	if err != nil {
		return nil, fmt.Errorf("failed to apply JMESPath %q: %w", expr, err)
	}
	return out, nil
}

func (ev *evaluation) substituteString(doc *jsoncontext.Document, s string) (string, error) {
	out, err := ev.substitute(doc, s, "")
	if err != nil {
		return "", err
	}
	if str, ok := out.(string); ok {
		return str, nil
	}
	return fmt.Sprint(out), nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// isPinned reports whether the values pin the entry itself or a path
// inside it ("imageData.configData.created" pins imageData).
func isPinned[V any](pinned map[string]V, name string) bool {
	if _, ok := pinned[name]; ok {
		return true
	}
	for k := range pinned {
		if strings.HasPrefix(k, name+".") {
			return true
		}
	}
	return false
}
