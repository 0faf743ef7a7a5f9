package jmespath

import "testing"

func TestStringFunctions(t *testing.T) {
	runFnCases(t, []fnCase{
		{expr: "compare('a', 'b')", want: -1.0},
		{expr: "compare('b', 'b')", want: 0.0},
		{expr: "compare('c', 'b')", want: 1.0},
		{expr: "compare('a', `1`)", wantErr: "Invalid type for: 1"},
		{expr: "equal_fold('Go', 'GO')", want: true},
		{expr: "equal_fold('Go', 'Rust')", want: false},
		{expr: "replace('aaaa', 'a', 'b', `2`)", want: "bbaa"},
		{expr: "replace('aaaa', 'a', 'b', `-1`)", want: "bbbb"},
		{expr: "replace('aaaa', 'a', 'b', `1.5`)", wantErr: "must be an integer"},
		{expr: "replace_all('a-b-c', '-', '+')", want: "a+b+c"},
		{expr: "to_upper('abc')", want: "ABC"},
		{expr: "to_lower('ABC')", want: "abc"},
		{expr: "trim('--a-b--', '-')", want: "a-b"},
		{expr: "trim('xyhixy', 'yx')", want: "hi"},
		{expr: "trim_prefix('registry/app', 'registry/')", want: "app"},
		{expr: "trim_prefix('app', 'registry/')", want: "app"},
		{expr: "split('a,b,,c', ',')", want: []any{"a", "b", "", "c"}},
		{expr: "truncate('kubernetes', `4`)", want: "kube"},
		{expr: "truncate('kube', `10`)", want: "kube"},
		{expr: "truncate('kube', `-3`)", want: ""},
		{expr: "regex_match('^nginx', 'nginx:latest')", want: true},
		{expr: "regex_match('latest', 'nginx:latest')", want: true}, // not anchored
		{expr: "regex_match('^[0-9]+$', `42`)", want: true},
		{expr: "regex_match('^1.1$', `1.1`)", want: true},
		{expr: "regex_match('^16777217$', `16777217`)", want: false}, // 32-bit formatting: 1.6777216e+07
		{expr: "regex_match('(', 'x')", wantErr: "JMESPath function 'regex_match': error parsing regexp"},
		{expr: "regex_match('x', `true`)", wantErr: "Invalid type for: true"},
		{expr: "regex_replace_all('([a-z]+)-([0-9]+)', 'app-1', '$2-$1')", want: "1-app"},
		{expr: "regex_replace_all('[0-9]', `123`, 'x')", want: "xxx"},
		{expr: "regex_replace_all('a', 'banana', `1`)", want: "b1n1n1"},
		{expr: "regex_replace_all_literal('([a-z]+)', 'app', '$1$1')", want: "$1$1"},
		{expr: "pattern_match('nginx:*', 'nginx:1.25')", want: true},
		{expr: "pattern_match('nginx:?', 'nginx:12')", want: false},
		{expr: "pattern_match('1?', `12`)", want: true},
		{expr: "pattern_match('*', '')", want: true},
		{expr: "to_boolean('TRUE')", want: true},
		{expr: "to_boolean('false')", want: false},
		{expr: "to_boolean('yes')", wantErr: "must be 'true' or 'false'"},
		{expr: "base64_encode('hello')", want: "aGVsbG8="},
		{expr: "base64_decode('aGVsbG8=')", want: "hello"},
		{expr: "base64_decode('***')", wantErr: "illegal base64 data"},
		{expr: "path_canonicalize('/a//b/./c/../d')", want: "/a/b/d"},
		{expr: "sha256('abc')", want: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{expr: "sha1('abc')", want: "a9993e364706816aba3e25717850c26c9cd0d89d"},
		{expr: "md5('abc')", want: "900150983cd24fb0d6963f7d28e17f72"},
		{expr: "semver_compare('1.5.0', '>1.0.0 <2.0.0')", want: true},
		{expr: "semver_compare('2.5.0', '>1.0.0 <2.0.0')", want: false},
		{expr: "semver_compare('1.x', '>1.0.0')", wantErr: "JMESPath function 'semver_compare'"},
		{expr: "semver_compare('1.0.0', '~~')", wantErr: "JMESPath function 'semver_compare'"},
	})
}

func TestRandom(t *testing.T) {
	i := New()
	for _, re := range []string{"[a-z]{8}", "[0-9a-f]{4}-(x|y)+", `\d{3}`, "a*b?c+", ".{5}", "^ab$"} {
		out, err := i.Search("random('"+re+"')", nil)
		if err != nil {
			t.Fatalf("random(%q): %v", re, err)
		}
		ok, _ := i.Search("regex_match('^(?:"+re+")$', @)", out)
		if ok != true {
			t.Errorf("random(%q) = %q does not match it", re, out)
		}
	}
	if _, err := i.Search("random('a{1000}{1000}')", nil); err == nil {
		t.Error("random of a huge expansion did not fail")
	}
	if _, err := i.Search("random('[')", nil); err == nil {
		t.Error("random of an invalid regex did not fail")
	}
}

func TestWildcardMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"", "", true},
		{"", "a", false},
		{"*", "anything", true},
		{"a*c", "abbbc", true},
		{"a*c", "abbbd", false},
		{"?", "é", true},
		{"*.example.com", "x.example.com", true},
		{"a*b*c", "aXbYbZc", true},
		{"a?", "a", false},
	} {
		if got := wildcardMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("wildcardMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}
