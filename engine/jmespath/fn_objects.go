package jmespath

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"

	"sigs.k8s.io/yaml"
)

func fnLabelMatch(a []any) (any, error) {
	selector, labels := a[0].(map[string]any), a[1].(map[string]any)
	for k, want := range selector {
		got, ok := labels[k]
		if !ok || !reflect.DeepEqual(got, want) {
			return false, nil
		}
	}
	return true, nil
}

func fnLookup(a []any) (any, error) {
	switch coll := a[0].(type) {
	case map[string]any:
		key, ok := a[1].(string)
		if !ok {
			return nil, fmt.Errorf("argument 2 must be a string to look up an object, got %s", typeName(a[1]))
		}
		return coll[key], nil
	case []any:
		if _, ok := number(a[1]); !ok {
			return nil, fmt.Errorf("argument 2 must be a number to look up an array, got %s", typeName(a[1]))
		}
		i, err := integer(a[1], 2)
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= len(coll) {
			return nil, nil
		}
		return coll[i], nil
	}
	return nil, fmt.Errorf("argument 1 must be an object or an array, got %s", typeName(a[0]))
}

func fnItems(a []any) (any, error) {
	keyName, valName := a[1].(string), a[2].(string)
	switch coll := a[0].(type) {
	case map[string]any:
		// Sized up front: this runs per request.
		keys := slices.AppendSeq(make([]string, 0, len(coll)), maps.Keys(coll))
		slices.Sort(keys)
		out := make([]any, len(keys))
		for i, k := range keys {
			out[i] = map[string]any{keyName: k, valName: coll[k]}
		}
		return out, nil
	case []any:
		out := make([]any, len(coll))
		for i, v := range coll {
			out[i] = map[string]any{keyName: float64(i), valName: v}
		}
		return out, nil
	}
	return nil, fmt.Errorf("argument 1 must be an object or an array, got %s", typeName(a[0]))
}

func fnObjectFromLists(a []any) (any, error) {
	keys, values := a[0].([]any), a[1].([]any)
	out := make(map[string]any, len(keys))
	for i, k := range keys {
		key, err := keyString(k)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		if i < len(values) {
			out[key] = values[i]
		} else {
			out[key] = nil
		}
	}
	return out, nil
}

// keyString stringifies a scalar used as an object key.
func keyString(v any) (string, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case bool:
		return strconv.FormatBool(t), nil
	}
	if f, ok := number(v); ok {
		return strconv.FormatFloat(f, 'f', -1, 64), nil
	}
	return "", fmt.Errorf("cannot use %s as an object key", typeName(v))
}

func fnParseJSON(a []any) (any, error) {
	var out any
	if err := json.Unmarshal([]byte(a[0].(string)), &out); err != nil {
		return nil, err
	}
	return out, nil
}

func fnParseYAML(a []any) (any, error) {
	j, err := yaml.YAMLToJSON([]byte(a[0].(string)))
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(j, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// rsaPublicKey is how x509_decode renders a public key: N as a decimal string,
// E as a number (Kyverno's shape).
type rsaPublicKey struct {
	N string
	E int
}

// fnX509Decode turns a PEM certificate or CSR into the JSON form of Go's
// x509.Certificate / x509.CertificateRequest, with the public key replaced by
// {N, E}. Only RSA keys are accepted, as in Kyverno.
func fnX509Decode(a []any) (any, error) {
	block, _ := pem.Decode([]byte(a[0].(string)))
	if block == nil {
		return nil, errors.New("invalid certificate: no PEM block found")
	}
	var doc any
	switch block.Type {
	case "CERTIFICATE":
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		key, err := rsaKey(cert.PublicKeyAlgorithm, cert.PublicKey)
		if err != nil {
			return nil, err
		}
		cert.PublicKey = key
		doc = cert
	case "CERTIFICATE REQUEST":
		csr, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			return nil, err
		}
		key, err := rsaKey(csr.PublicKeyAlgorithm, csr.PublicKey)
		if err != nil {
			return nil, err
		}
		csr.PublicKey = key
		doc = csr
	default:
		return nil, fmt.Errorf("invalid PEM block type %q: want CERTIFICATE or CERTIFICATE REQUEST", block.Type)
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(doc); err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		return nil, err
	}
	return out, nil
}

func rsaKey(alg x509.PublicKeyAlgorithm, key any) (rsaPublicKey, error) {
	pk, ok := key.(*rsa.PublicKey)
	if alg != x509.RSA || !ok {
		return rsaPublicKey{}, fmt.Errorf("certificate should use rsa algorithm, got %v", alg)
	}
	return rsaPublicKey{N: pk.N.String(), E: pk.E}, nil
}
