package jmespath

import "testing"

func TestArithmeticFunctions(t *testing.T) {
	runFnCases(t, []fnCase{
		// add / subtract
		{expr: "add(`1`, `2.5`)", want: 3.5},
		{expr: "add('1Gi', '512Mi')", want: "1536Mi"},
		{expr: "add('500m', '1')", want: "1500m"},
		{expr: "add('1h', '30m0s')", want: "1h30m0s"},
		{expr: "add('1h', '30m')", wantErr: "types mismatch"}, // "30m" is 30 milli, a quantity
		{expr: "add('1Gi', `1`)", wantErr: "types mismatch: cannot add quantity and number"},
		{expr: "add('abc', `1`)", wantErr: "invalid operand 1"},
		{expr: "add(`true`, `1`)", wantErr: "invalid operand 1"},
		{expr: "subtract(`5`, `7`)", want: -2.0},
		{expr: "subtract('2Gi', '512Mi')", want: "1536Mi"},
		{expr: "subtract('1h', '90s')", want: "58m30s"},
		// multiply
		{expr: "multiply(`3`, `4`)", want: 12.0},
		{expr: "multiply('100Mi', `2`)", want: "200Mi"},
		{expr: "multiply(`2`, '250m')", want: "500m"},
		{expr: "multiply('1h', `1.5`)", want: "1h30m0s"},
		{expr: "multiply(`2`, '45s')", want: "1m30s"},
		{expr: "multiply('1Gi', '1Gi')", wantErr: "cannot multiply quantity and quantity"},
		{expr: "multiply('1s', '1s')", wantErr: "cannot multiply duration and duration"},
		// divide
		{expr: "divide(`7`, `2`)", want: 3.5},
		{expr: "divide('1Gi', '512Mi')", want: 2.0},
		{expr: "divide('1h', '20m0s')", want: 3.0},
		{expr: "divide('1Gi', `4`)", want: "256Mi"},
		{expr: "divide('1', `3`)", want: "0"}, // rounded down at scale 0
		{expr: "divide('1.0', `3`)", want: "300m"},
		{expr: "divide('1h', `4`)", want: "15m0s"},
		{expr: "divide(`1`, '1Gi')", wantErr: "cannot divide number and quantity"},
		{expr: "divide(`1`, '1s')", wantErr: "cannot divide number and duration"},
		{expr: "divide(`1`, `0`)", wantErr: "Zero divisor passed"},
		{expr: "divide('1Gi', '0')", wantErr: "Zero divisor passed"},
		{expr: "divide('1Gi', `0`)", wantErr: "Zero divisor passed"},
		{expr: "divide('1h', '0s')", wantErr: "Zero divisor passed"},
		// modulo
		{expr: "modulo(`7`, `3`)", want: 1.0},
		{expr: "modulo(`7.5`, `3`)", wantErr: "Non-integer argument(s) passed for modulo"},
		{expr: "modulo(`7`, `0`)", wantErr: "Zero divisor passed"},
		{expr: "modulo('5Gi', '2Gi')", want: "1Gi"},
		{expr: "modulo('1500m', '1')", wantErr: "Non-integer"},
		{expr: "modulo('1h10m', '1h')", want: "10m0s"},
		{expr: "modulo('1h', '0s')", wantErr: "Zero divisor passed"},
		{expr: "modulo('1h', `1`)", wantErr: "types mismatch"},
		// sum
		{expr: "sum(`[1, 2, 3.5]`)", want: 6.5},
		{expr: "sum(['1Gi', '512Mi'])", data: "{}", want: "1536Mi"}, // multi-select needs a non-null current node
		{expr: "sum(`[\"1Gi\", \"512Mi\"]`)", want: "1536Mi"},
		{expr: "sum(`[\"1h\", \"1h30m\"]`)", want: "2h30m0s"},
		{expr: "sum(`[\"1Gi\"]`)", want: "1Gi"},
		{expr: "sum(`[]`)", wantErr: "at least one element in the array is required"},
		{expr: "sum(`[\"1Gi\", 1]`)", wantErr: "types mismatch"},
		{expr: "sum(`[1, \"x\"]`)", wantErr: "invalid operand"},
		// round
		{expr: "round(`3.14159`, `2`)", want: 3.14},
		{expr: "round(`2.5`, `0`)", want: 3.0},
		{expr: "round(`2.5`, `-1`)", wantErr: "non-negative integer"},
		{expr: "round(`2.5`, `1.5`)", wantErr: "non-negative integer"},
	})
}

func TestArithmeticAcceptsGoIntegers(t *testing.T) {
	i := New()
	got, err := i.Search("add(a, b)", map[string]any{"a": int64(2), "b": 3})
	if err != nil || got != 5.0 {
		t.Errorf("add(int64, int) = %v, %v; want 5", got, err)
	}
}
