package jmespath

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/resource"
)

// operandKind is what an arithmetic operand turned out to be.
type operandKind int

const (
	kindNumber operandKind = iota
	kindQuantity
	kindDuration
)

func (k operandKind) String() string {
	switch k {
	case kindQuantity:
		return "quantity"
	case kindDuration:
		return "duration"
	}
	return "number"
}

// operand is a parsed arithmetic argument. A JSON number is a number; a
// string is tried as a Kubernetes quantity first and as a Go duration second,
// so "10" and "1m" (one milli) are quantities while "1h" is a duration.
type operand struct {
	kind operandKind
	num  float64
	qty  resource.Quantity
	dur  time.Duration
}

var errZeroDivisor = errors.New("Zero divisor passed")

func parseOperand(v any, pos int) (operand, error) {
	if f, ok := number(v); ok {
		return operand{kind: kindNumber, num: f}, nil
	}
	if s, ok := v.(string); ok {
		if q, err := resource.ParseQuantity(s); err == nil {
			return operand{kind: kindQuantity, qty: q}, nil
		}
		if d, err := time.ParseDuration(s); err == nil {
			return operand{kind: kindDuration, dur: d}, nil
		}
	}
	return operand{}, fmt.Errorf("invalid operand %d: %v is neither a number, a quantity nor a duration", pos, render(v))
}

func render(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

func parseOperands(a []any) (operand, operand, error) {
	x, err := parseOperand(a[0], 1)
	if err != nil {
		return x, x, err
	}
	y, err := parseOperand(a[1], 2)
	return x, y, err
}

func mismatch(op string, x, y operand) error {
	return fmt.Errorf("types mismatch: cannot %s %s and %s", op, x.kind, y.kind)
}

func fnAdd(a []any) (any, error) {
	x, y, err := parseOperands(a)
	if err != nil {
		return nil, err
	}
	return add(x, y)
}

func add(x, y operand) (any, error) {
	switch {
	case x.kind != y.kind:
		return nil, mismatch("add", x, y)
	case x.kind == kindQuantity:
		q := x.qty.DeepCopy()
		q.Add(y.qty)
		return q.String(), nil
	case x.kind == kindDuration:
		return (x.dur + y.dur).String(), nil
	}
	return x.num + y.num, nil
}

func fnSubtract(a []any) (any, error) {
	x, y, err := parseOperands(a)
	if err != nil {
		return nil, err
	}
	switch {
	case x.kind != y.kind:
		return nil, mismatch("subtract", x, y)
	case x.kind == kindQuantity:
		q := x.qty.DeepCopy()
		q.Sub(y.qty)
		return q.String(), nil
	case x.kind == kindDuration:
		return (x.dur - y.dur).String(), nil
	}
	return x.num - y.num, nil
}

// decimal converts a float to an exact decimal through its shortest text form,
// so 0.1 scales a quantity by exactly one tenth.
func decimal(f float64) (*inf.Dec, error) {
	d, ok := new(inf.Dec).SetString(strconv.FormatFloat(f, 'f', -1, 64))
	if !ok {
		return nil, fmt.Errorf("cannot use %v as a decimal", f)
	}
	return d, nil
}

func scaleQuantity(q resource.Quantity, f float64) (any, error) {
	d, err := decimal(f)
	if err != nil {
		return nil, err
	}
	prod := new(inf.Dec).Mul(q.AsDec(), d)
	return resource.NewDecimalQuantity(*prod, q.Format).String(), nil
}

func scaleDuration(d time.Duration, f float64) any {
	return time.Duration(float64(d) * f).String()
}

func fnMultiply(a []any) (any, error) {
	x, y, err := parseOperands(a)
	if err != nil {
		return nil, err
	}
	switch {
	case x.kind == kindNumber && y.kind == kindNumber:
		return x.num * y.num, nil
	case x.kind == kindQuantity && y.kind == kindNumber:
		return scaleQuantity(x.qty, y.num)
	case x.kind == kindNumber && y.kind == kindQuantity:
		return scaleQuantity(y.qty, x.num)
	case x.kind == kindDuration && y.kind == kindNumber:
		return scaleDuration(x.dur, y.num), nil
	case x.kind == kindNumber && y.kind == kindDuration:
		return scaleDuration(y.dur, x.num), nil
	}
	return nil, mismatch("multiply", x, y)
}

func fnDivide(a []any) (any, error) {
	x, y, err := parseOperands(a)
	if err != nil {
		return nil, err
	}
	switch {
	case x.kind == kindNumber && y.kind == kindNumber:
		if y.num == 0 {
			return nil, errZeroDivisor
		}
		return x.num / y.num, nil
	case x.kind == kindQuantity && y.kind == kindQuantity:
		if y.qty.IsZero() {
			return nil, errZeroDivisor
		}
		return x.qty.AsApproximateFloat64() / y.qty.AsApproximateFloat64(), nil
	case x.kind == kindDuration && y.kind == kindDuration:
		if y.dur == 0 {
			return nil, errZeroDivisor
		}
		return float64(x.dur) / float64(y.dur), nil
	case x.kind == kindQuantity && y.kind == kindNumber:
		if y.num == 0 {
			return nil, errZeroDivisor
		}
		divisor, err := decimal(y.num)
		if err != nil {
			return nil, err
		}
		// Round down at the larger of the two scales, as Kyverno does.
		dividend := x.qty.AsDec()
		scale := max(dividend.Scale(), divisor.Scale())
		quo := new(inf.Dec).QuoRound(dividend, divisor, scale, inf.RoundDown)
		return resource.NewDecimalQuantity(*quo, x.qty.Format).String(), nil
	case x.kind == kindDuration && y.kind == kindNumber:
		if y.num == 0 {
			return nil, errZeroDivisor
		}
		return time.Duration(float64(x.dur) / y.num).String(), nil
	}
	return nil, mismatch("divide", x, y)
}

var errNonIntModulo = errors.New("Non-integer argument(s) passed for modulo")

func fnModulo(a []any) (any, error) {
	x, y, err := parseOperands(a)
	if err != nil {
		return nil, err
	}
	switch {
	case x.kind == kindNumber && y.kind == kindNumber:
		if x.num != math.Trunc(x.num) || y.num != math.Trunc(y.num) {
			return nil, errNonIntModulo
		}
		if y.num == 0 {
			return nil, errZeroDivisor
		}
		return float64(int64(x.num) % int64(y.num)), nil
	case x.kind == kindQuantity && y.kind == kindQuantity:
		i, ok1 := x.qty.AsInt64()
		j, ok2 := y.qty.AsInt64()
		if !ok1 || !ok2 {
			return nil, errNonIntModulo
		}
		if j == 0 {
			return nil, errZeroDivisor
		}
		return resource.NewQuantity(i%j, x.qty.Format).String(), nil
	case x.kind == kindDuration && y.kind == kindDuration:
		if y.dur == 0 {
			return nil, errZeroDivisor
		}
		return (x.dur % y.dur).String(), nil
	}
	return nil, mismatch("modulo", x, y)
}

// fnSum folds add over the array. A one-element array returns its element
// unchanged (no normalisation), and an empty array is an error.
func fnSum(a []any) (any, error) {
	items := a[0].([]any)
	if len(items) == 0 {
		return nil, errors.New("at least one element in the array is required")
	}
	result := items[0]
	for i, item := range items[1:] {
		x, err := parseOperand(result, i+1)
		if err != nil {
			return nil, err
		}
		y, err := parseOperand(item, i+2)
		if err != nil {
			return nil, err
		}
		if result, err = add(x, y); err != nil {
			return nil, err
		}
	}
	return result, nil
}

func fnRound(a []any) (any, error) {
	v, _ := number(a[0])
	digits, err := integer(a[1], 2)
	if err != nil || digits < 0 {
		return nil, errors.New("Non-integer argument(s) passed for round off: digits must be a non-negative integer")
	}
	p := math.Pow10(digits)
	return math.Round(v*p) / p, nil
}
