package celenv

import (
	"strings"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
)

// Member declares one overload of a receiver method, named by the
// method's spelling (see Method).
func Member(id string, args []*celgo.Type, result *celgo.Type, fn func(args ...ref.Val) ref.Val) func(string) celgo.FunctionOpt {
	return func(prefix string) celgo.FunctionOpt {
		return celgo.MemberOverload(prefix+"_"+id, args, result, celgo.FunctionBinding(fn))
	}
}

// Method declares a receiver method in both spellings, with overload ids
// that differ between them.
func Method(name string, overloads ...func(string) celgo.FunctionOpt) []celgo.EnvOption {
	lower := strings.ToLower(name[:1]) + name[1:]
	var out []celgo.EnvOption
	for _, n := range []string{name, lower} {
		opts := make([]celgo.FunctionOpt, len(overloads))
		for i, o := range overloads {
			opts[i] = o(n)
		}
		out = append(out, celgo.Function(n, opts...))
	}
	return out
}

// Global declares a global function.
func Global(name string, overloads ...celgo.FunctionOpt) celgo.EnvOption {
	return celgo.Function(name, overloads...)
}

var (
	str = celgo.StringType
	dyn = celgo.DynType
)
