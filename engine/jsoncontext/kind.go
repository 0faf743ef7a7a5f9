package jsoncontext

import "fmt"

// KindOf names the JSON kind of a plain JSON value for messages: "null",
// "a string", "a boolean", "a number", "a list", "an object"; any other Go
// value by its type.
func KindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, float32, int, int64, int32, uint, uint64, uint32:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
