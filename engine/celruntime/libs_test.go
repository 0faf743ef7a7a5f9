package celruntime

import (
	"reflect"
	"testing"
)

// TestHTTPAnswer: a library call's {body, statusCode} reads as Kyverno's
// live http.* answers (an object body with statusCode merged in) and as
// its CLI mocks (the body under body).
func TestHTTPAnswer(t *testing.T) {
	for _, tt := range []struct {
		in, want any
	}{
		{map[string]any{"body": map[string]any{"allowed": true}, "statusCode": 200},
			map[string]any{"allowed": true, "statusCode": 200, "body": map[string]any{"allowed": true}}},
		{map[string]any{"body": map[string]any{"body": "own", "statusCode": "theirs"}, "statusCode": 404},
			map[string]any{"body": "own", "statusCode": 404}},
		{map[string]any{"body": []any{"a"}, "statusCode": 200}, map[string]any{"body": []any{"a"}, "statusCode": 200}},
		{map[string]any{"body": nil, "statusCode": 502}, map[string]any{"body": nil, "statusCode": 502}},
	} {
		if got := httpAnswer(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("httpAnswer(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
