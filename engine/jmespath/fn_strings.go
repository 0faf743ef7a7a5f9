package jmespath

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/blang/semver/v4"
)

// The library has already checked argument types, so the assertions below
// cannot fail for values it accepted.

func fnCompare(a []any) (any, error) {
	return float64(strings.Compare(a[0].(string), a[1].(string))), nil
}

func fnEqualFold(a []any) (any, error) {
	return strings.EqualFold(a[0].(string), a[1].(string)), nil
}

func fnReplace(a []any) (any, error) {
	n, err := integer(a[3], 4)
	if err != nil {
		return nil, err
	}
	return strings.Replace(a[0].(string), a[1].(string), a[2].(string), n), nil
}

func fnReplaceAll(a []any) (any, error) {
	return strings.ReplaceAll(a[0].(string), a[1].(string), a[2].(string)), nil
}

func fnToUpper(a []any) (any, error) { return strings.ToUpper(a[0].(string)), nil }

func fnToLower(a []any) (any, error) { return strings.ToLower(a[0].(string)), nil }

func fnTrim(a []any) (any, error) { return strings.Trim(a[0].(string), a[1].(string)), nil }

func fnTrimPrefix(a []any) (any, error) {
	return strings.TrimPrefix(a[0].(string), a[1].(string)), nil
}

func fnSplit(a []any) (any, error) {
	parts := strings.Split(a[0].(string), a[1].(string))
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

// fnTruncate keeps the first len bytes, as Kyverno slices the Go string.
func fnTruncate(a []any) (any, error) {
	s := a[0].(string)
	n := int(a[1].(float64))
	if n < 0 {
		n = 0
	}
	if n > len(s) {
		n = len(s)
	}
	return s[:n], nil
}

// stringOrNumber renders an S|N argument. Kyverno formats numbers with 32-bit
// precision (strconv.FormatFloat(f, 'f', -1, 32)); that quirk is reproduced so
// regex_match('^1.1$', `1.1`) behaves the same.
func stringOrNumber(v any, pos int) (string, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 32), nil
	case int:
		return strconv.Itoa(t), nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	}
	return "", fmt.Errorf("argument %d must be a string or a number, got %s", pos, typeName(v))
}

func fnRegexMatch(a []any) (any, error) {
	src, err := stringOrNumber(a[1], 2)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(a[0].(string))
	if err != nil {
		return nil, err
	}
	return re.MatchString(src), nil
}

func regexReplace(a []any, literal bool) (any, error) {
	src, err := stringOrNumber(a[1], 2)
	if err != nil {
		return nil, err
	}
	repl, err := stringOrNumber(a[2], 3)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(a[0].(string))
	if err != nil {
		return nil, err
	}
	if literal {
		return re.ReplaceAllLiteralString(src, repl), nil
	}
	return re.ReplaceAllString(src, repl), nil
}

func fnRegexReplaceAll(a []any) (any, error) { return regexReplace(a, false) }

func fnRegexReplaceAllLiteral(a []any) (any, error) { return regexReplace(a, true) }

func fnPatternMatch(a []any) (any, error) {
	src, err := stringOrNumber(a[1], 2)
	if err != nil {
		return nil, err
	}
	return wildcardMatch(a[0].(string), src), nil
}

func fnToBoolean(a []any) (any, error) {
	switch strings.ToLower(a[0].(string)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return nil, fmt.Errorf("lowercase argument must be 'true' or 'false' (provided: %q)", a[0])
}

func fnBase64Decode(a []any) (any, error) {
	b, err := base64.StdEncoding.DecodeString(a[0].(string))
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func fnBase64Encode(a []any) (any, error) {
	return base64.StdEncoding.EncodeToString([]byte(a[0].(string))), nil
}

func fnPathCanonicalize(a []any) (any, error) { return filepath.Join(a[0].(string)), nil }

func fnSHA256(a []any) (any, error) {
	sum := sha256.Sum256([]byte(a[0].(string)))
	return hex.EncodeToString(sum[:]), nil
}

func fnSHA1(a []any) (any, error) {
	sum := sha1.Sum([]byte(a[0].(string)))
	return hex.EncodeToString(sum[:]), nil
}

func fnMD5(a []any) (any, error) {
	sum := md5.Sum([]byte(a[0].(string)))
	return hex.EncodeToString(sum[:]), nil
}

func fnSemverCompare(a []any) (any, error) {
	v, err := semver.Parse(a[0].(string))
	if err != nil {
		return nil, err
	}
	r, err := semver.ParseRange(a[1].(string))
	if err != nil {
		return nil, err
	}
	return r(v), nil
}
