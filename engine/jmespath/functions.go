package jmespath

import (
	"fmt"
	"math/rand/v2"
	"strings"

	gojmespath "github.com/kyverno/go-jmespath"
)

// FunctionInfo describes one function callable from an expression.
type FunctionInfo struct {
	Name        string
	Signature   string // e.g. "truncate(string, number) string"
	Description string
	Custom      bool // true for Kyverno's functions, false for JMESPath built-ins
}

// Argument types as the library checks them before a handler runs.
var (
	tString = []gojmespath.JpType{gojmespath.JpString}
	tNumber = []gojmespath.JpType{gojmespath.JpNumber}
	tArray  = []gojmespath.JpType{gojmespath.JpArray}
	tObject = []gojmespath.JpType{gojmespath.JpObject}
	tAny    = []gojmespath.JpType{gojmespath.JpAny}
	tStrNum = []gojmespath.JpType{gojmespath.JpString, gojmespath.JpNumber}
	tObjArr = []gojmespath.JpType{gojmespath.JpObject, gojmespath.JpArray}
)

// function is one custom function: its declared argument types (checked by
// the library before the handler runs), its return type and description for
// documentation, and its handler.
type function struct {
	name    string
	args    [][]gojmespath.JpType
	returns string
	note    string
	handler func(args []any) (any, error)
}

func (f function) entry() gojmespath.FunctionEntry {
	specs := make([]gojmespath.ArgSpec, len(f.args))
	for i, t := range f.args {
		specs[i] = gojmespath.ArgSpec{Types: t}
	}
	name, handler := f.name, f.handler
	return gojmespath.FunctionEntry{
		Name:      name,
		Arguments: specs,
		Handler: func(args []any) (any, error) {
			// The library checks only the count when a function takes no
			// arguments; reject extra ones like every other arity mismatch.
			if len(specs) == 0 && len(args) != 0 {
				return nil, fmt.Errorf("JMESPath function '%s': expects no arguments, got %d", name, len(args))
			}
			out, err := handler(args)
			if err != nil {
				return nil, fmt.Errorf("JMESPath function '%s': %w", name, err)
			}
			return out, nil
		},
	}
}

func (f function) info() FunctionInfo {
	params := make([]string, len(f.args))
	for i, t := range f.args {
		alts := make([]string, len(t))
		for j, a := range t {
			alts[j] = string(a)
		}
		params[i] = strings.Join(alts, "|")
	}
	return FunctionInfo{
		Name:        f.name,
		Signature:   fmt.Sprintf("%s(%s) %s", f.name, strings.Join(params, ", "), f.returns),
		Description: f.note,
		Custom:      true,
	}
}

func args(types ...[]gojmespath.JpType) [][]gojmespath.JpType { return types }

// customFunctions returns Kyverno's 51 custom functions, in the order of
// shared/spec/jmespath-functions.md.
func customFunctions(e *env) []function {
	return []function{
		// Strings.
		{"compare", args(tString, tString), "number", "strings.Compare: -1, 0 or 1", fnCompare},
		{"equal_fold", args(tString, tString), "boolean", "equality ignoring case", fnEqualFold},
		{"replace", args(tString, tString, tString, tNumber), "string", "replace n instances of old by new; n = -1 replaces all", fnReplace},
		{"replace_all", args(tString, tString, tString), "string", "replace every instance of old by new", fnReplaceAll},
		{"to_upper", args(tString), "string", "upper-case", fnToUpper},
		{"to_lower", args(tString), "string", "lower-case", fnToLower},
		{"trim", args(tString, tString), "string", "strings.Trim: the second argument is a set of characters", fnTrim},
		{"trim_prefix", args(tString, tString), "string", "remove the prefix when present", fnTrimPrefix},
		{"split", args(tString, tString), "array", "split the string at every separator", fnSplit},
		{"truncate", args(tString, tNumber), "string", "keep the first len bytes; a negative len is 0", fnTruncate},
		{"regex_match", args(tString, tStrNum), "boolean", "RE2 match, not anchored", fnRegexMatch},
		{"regex_replace_all", args(tString, tStrNum, tStrNum), "string", "RE2 replace-all; $1 expansions work", fnRegexReplaceAll},
		{"regex_replace_all_literal", args(tString, tStrNum, tStrNum), "string", "RE2 replace-all with a literal replacement", fnRegexReplaceAllLiteral},
		{"pattern_match", args(tString, tStrNum), "boolean", "wildcard match: * any run, ? one character", fnPatternMatch},
		{"to_boolean", args(tString), "boolean", `"true" or "false" in any case; anything else is an error`, fnToBoolean},
		{"base64_decode", args(tString), "string", "standard base64 decode", fnBase64Decode},
		{"base64_encode", args(tString), "string", "standard base64 encode", fnBase64Encode},
		{"path_canonicalize", args(tString), "string", "filepath.Join: removes //, /./ and ..", fnPathCanonicalize},
		{"random", args(tString), "string", "a random string that matches the regular expression", e.fnRandom},
		{"sha256", args(tString), "string", "lower-case hex SHA-256 digest", fnSHA256},
		{"sha1", args(tString), "string", "lower-case hex SHA-1 digest", fnSHA1},
		{"md5", args(tString), "string", "lower-case hex MD5 digest", fnMD5},
		{"image_normalize", args(tString), "string", "fully qualified image reference with the default registry and :latest", e.fnImageNormalize},
		{"is_external_url", args(tString), "boolean", "false when the host is loopback or private; resolves DNS names", e.fnIsExternalURL},
		{"semver_compare", args(tString, tString), "boolean", `true if the version satisfies the range, e.g. ">1.0.0 <2.0.0"`, fnSemverCompare},
		// Objects, arrays and parsing.
		{"label_match", args(tObject, tObject), "boolean", "every key/value of the first object is in the second", fnLabelMatch},
		{"lookup", args(tObjArr, tStrNum), "any", "map[key] or array[index]; out of range is null", fnLookup},
		{"items", args(tObjArr, tString, tString), "array", "[{keyName: k, valName: v}] with keys sorted, or indexes for arrays", fnItems},
		{"object_from_lists", args(tArray, tArray), "object", "zip keys and values; missing values are null", fnObjectFromLists},
		{"parse_json", args(tString), "any", "decode JSON", fnParseJSON},
		{"parse_yaml", args(tString), "any", "decode YAML", fnParseYAML},
		{"x509_decode", args(tString), "object", "decode a PEM certificate or certificate request (RSA only)", fnX509Decode},
		// Arithmetic.
		{"add", args(tAny, tAny), "any", "sum of two numbers, quantities or durations", fnAdd},
		{"subtract", args(tAny, tAny), "any", "difference of two numbers, quantities or durations", fnSubtract},
		{"multiply", args(tAny, tAny), "any", "product; quantities and durations scale by numbers", fnMultiply},
		{"divide", args(tAny, tAny), "any", "quotient; like kinds give a number, a number divisor keeps the kind", fnDivide},
		{"modulo", args(tAny, tAny), "any", "remainder of integers, quantities or durations", fnModulo},
		{"sum", args(tArray), "any", "sum of the numbers, quantities or durations of a non-empty array", fnSum},
		{"round", args(tNumber, tNumber), "number", "round to the given non-negative number of decimal digits", fnRound},
		// Time.
		{"time_now", nil, "string", "local time now, RFC 3339", e.fnTimeNow},
		{"time_now_utc", nil, "string", "UTC time now, RFC 3339", e.fnTimeNowUTC},
		{"time_since", args(tString, tString, tString), "string", "duration t2 - t1; empty layout is RFC 3339, empty t2 is now", e.fnTimeSince},
		{"time_add", args(tString, tString), "string", "time plus duration", fnTimeAdd},
		{"time_parse", args(tString, tString), "string", "parse with a Go layout into RFC 3339; a numeric layout means epoch seconds", fnTimeParse},
		{"time_to_cron", args(tString), "string", `"min hour dom month dow" of the time in UTC`, fnTimeToCron},
		{"time_utc", args(tString), "string", "the time in UTC", fnTimeUTC},
		{"time_diff", args(tString, tString), "string", "duration t2 - t1", fnTimeDiff},
		{"time_before", args(tString, tString), "boolean", "t1 < t2", fnTimeBefore},
		{"time_after", args(tString, tString), "boolean", "t1 > t2", fnTimeAfter},
		{"time_between", args(tString, tString, tString), "boolean", "start < t < end", fnTimeBetween},
		{"time_truncate", args(tString, tString), "string", "t truncated to a multiple of the duration", fnTimeTruncate},
	}
}

func defaultIntn(n int) int { return rand.IntN(n) }

// builtinInfos documents the JMESPath built-ins that stay available. sum is
// listed with the custom functions because Kyverno replaces it.
func builtinInfos() []FunctionInfo {
	b := []struct{ sig, note string }{
		{"abs(number) number", "absolute value"},
		{"avg(array[number]) number", "average"},
		{"ceil(number) number", "round up"},
		{"contains(array|string, any) boolean", "membership or substring"},
		{"ends_with(string, string) boolean", "suffix test"},
		{"floor(number) number", "round down"},
		{"join(string, array[string]) string", "join with a glue string"},
		{"keys(object) array", "object keys"},
		{"length(string|array|object) number", "length"},
		{"map(expref, array) array", "apply an expression to every element"},
		{"max(array[number]|array[string]) any", "largest element"},
		{"max_by(array, expref) any", "element with the largest key"},
		{"merge(object...) object", "merge objects, later keys win"},
		{"min(array[number]|array[string]) any", "smallest element"},
		{"min_by(array, expref) any", "element with the smallest key"},
		{"not_null(any...) any", "first non-null argument"},
		{"reverse(array|string) array|string", "reverse"},
		{"sort(array[number]|array[string]) array", "sort"},
		{"sort_by(array, expref) array", "sort by key"},
		{"starts_with(string, string) boolean", "prefix test"},
		{"to_array(any) array", "wrap a non-array in an array"},
		{"to_number(any) number", "convert to number"},
		{"to_string(any) string", "convert to string (JSON for non-strings)"},
		{"type(any) string", "JSON type name"},
		{"values(object) array", "object values"},
	}
	out := make([]FunctionInfo, len(b))
	for i, f := range b {
		out[i] = FunctionInfo{Name: f.sig[:strings.IndexByte(f.sig, '(')], Signature: f.sig, Description: f.note}
	}
	return out
}
