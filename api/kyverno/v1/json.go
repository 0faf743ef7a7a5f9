package v1

import (
	"bytes"
	"encoding/json"
	"fmt"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// strictUnmarshal decodes data into v and refuses unknown fields and
// trailing data.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("unexpected data after the JSON value")
	}
	return nil
}

// ToJSON encodes v as a free-form JSON field; nil yields nil.
func ToJSON(v any) (*apiextv1.JSON, error) {
	if v == nil {
		return nil, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &apiextv1.JSON{Raw: data}, nil
}

// FromJSON decodes a free-form JSON field into plain Go values (maps,
// slices, strings, float64, bool); nil yields nil.
func FromJSON(raw *apiextv1.JSON) (any, error) { return decodeJSON(raw) }
