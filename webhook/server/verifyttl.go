package server

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/charter-dev/charter/engine/ttl"
)

// PathVerifyTTL answers the TTL webhook: CREATE and UPDATE of objects of
// any kind that carry cleanup.kyverno.io/ttl (see webhook/config).
const PathVerifyTTL = "/verifyttl"

// verifyTTL refuses a cleanup.kyverno.io/ttl value the cleanup controller
// could not read, naming the accepted forms. Kyverno admits such a value
// with a warning and then never deletes the object (it lives forever,
// or for whatever part of the value Kyverno's lenient parser recognised);
// charter refuses it, so a TTL that is in the cluster is a TTL that works.
// A value that was already there (an UPDATE that leaves it alone) is
// admitted with a warning, so objects labelled before charter still take
// every other change.
func (h *handlers) verifyTTL(w http.ResponseWriter, r *http.Request) {
	var review rawReview
	if err := decodeReview(r, h.opts.MaxRequestBytes, &review); err != nil {
		writeError(w, err)
		return
	}
	ar := review.Request
	value, labelled, err := ttlLabel(ar.Object)
	if err != nil {
		writeResponse(w, denied(ar.UID, fmt.Sprintf("decoding %s %q: %v", ar.Kind.Kind, ar.Name, err)))
		return
	}
	if !labelled || ar.SubResource != "" {
		writeResponse(w, allowed(ar.UID, nil))
		return
	}
	_, perr := ttl.Parse(value)
	if perr == nil {
		writeResponse(w, allowed(ar.UID, nil))
		return
	}
	if old, had, _ := ttlLabel(ar.OldObject); had && old == value {
		writeResponse(w, allowed(ar.UID, []string{perr.Error() + "; the object will not be deleted"}))
		return
	}
	writeResponse(w, denied(ar.UID, perr.Error()))
}

// ttlLabel reads the TTL label of a raw object.
func ttlLabel(raw json.RawMessage) (string, bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	var probe struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return "", false, err
	}
	v, ok := probe.Metadata.Labels[ttl.Label]
	return v, ok, nil
}
