package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// The flag.Values over KubeletConfiguration fields whose types the flag
// package has no Var for. Each String is nil-safe (flag.PrintDefaults
// calls it on a zero value).

var (
	errParse = errors.New("parse error")
	errRange = errors.New("value out of range")
)

// int32Value is an int32 flag, as the flag package's int flags words
// its errors.
type int32Value int32

func (v *int32Value) String() string {
	if v == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*v), 10)
}

// Type names the value in the usage, as the flag package's IntVar.
func (v *int32Value) Type() string { return "int" }

func (v *int32Value) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 32)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return errRange
		}
		return errParse
	}
	*v = int32Value(n)
	return nil
}

// qpsValue is --kube-api-qps: a float, as before the field; the field
// (an int32) holds it truncated, exact keeps a fraction.
type qpsValue struct {
	p     *int32
	exact *float64
}

func (v *qpsValue) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*v.p), 10)
}

func (v *qpsValue) Type() string { return "float" }

func (v *qpsValue) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return errParse
	}
	if f > math.MaxInt32 || f < math.MinInt32 {
		return errRange
	}
	*v.p, *v.exact = int32(f), f
	return nil
}

// verbosityValue is -v; a negative level is level 0.
type verbosityValue struct{ p *logsapi.VerbosityLevel }

func (v *verbosityValue) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.FormatUint(uint64(*v.p), 10)
}

func (v *verbosityValue) Type() string { return "int" }

func (v *verbosityValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 32)
	if err != nil {
		return errParse
	}
	*v.p = logsapi.VerbosityLevel(max(n, 0))
	return nil
}

// authzModeValue is --authorization-mode.
type authzModeValue struct {
	p *kubeletv1beta1.KubeletAuthorizationMode
}

func (v authzModeValue) String() string {
	if v.p == nil {
		return ""
	}
	return string(*v.p)
}

func (v authzModeValue) Type() string { return "string" }

func (v authzModeValue) Set(s string) error {
	*v.p = kubeletv1beta1.KubeletAuthorizationMode(s)
	return nil
}

// taintsValue is --register-with-taints, "key[=value]:Effect,…".
type taintsValue struct{ p *[]v1.Taint }

func (f *taintsValue) String() string {
	if f == nil || f.p == nil {
		return ""
	}
	parts := make([]string, 0, len(*f.p))
	for _, t := range *f.p {
		parts = append(parts, t.ToString())
	}
	return strings.Join(parts, ",")
}

func (f *taintsValue) Type() string { return "string" }

func (f *taintsValue) Set(s string) error {
	taints, err := parseTaints(s)
	if err != nil {
		return err
	}
	*f.p = taints
	return nil
}

// list is a comma-separated list flag's Set: it replaces the list.
func list(dst *[]string) func(string) error {
	return func(v string) error {
		*dst = nil
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				*dst = append(*dst, s)
			}
		}
		return nil
	}
}

// parseTaints parses "key[=value]:Effect,…".
func parseTaints(s string) ([]v1.Taint, error) {
	var out []v1.Taint
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		kv, effect, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("%q: want key=value:Effect", part)
		}
		k, v, _ := strings.Cut(kv, "=")
		t := v1.Taint{Key: k, Value: v, Effect: v1.TaintEffect(effect)}
		if err := checkTaint(t); err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// checkTaint refuses a taint a Node cannot have.
func checkTaint(t v1.Taint) error {
	switch t.Effect {
	case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
	default:
		return errors.New("effect must be NoSchedule, PreferNoSchedule or NoExecute")
	}
	if t.Key == "" {
		return errors.New("empty key")
	}
	return nil
}

// printDefaults is flag.PrintDefaults naming the values of the types
// above as the flag package names its own (int, float, string), so the
// usage reads as it did before the flags were registered onto the
// KubeletConfiguration.
func printDefaults(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		var b strings.Builder
		fmt.Fprintf(&b, "  -%s", f.Name)
		name, usage := flag.UnquoteUsage(f)
		typed, ok := f.Value.(interface{ Type() string })
		if ok {
			name = typed.Type()
		}
		if len(name) > 0 {
			b.WriteString(" " + name)
		}
		if b.Len() <= 4 {
			b.WriteString("\t")
		} else {
			b.WriteString("\n    \t")
		}
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		if !isZeroValue(f) {
			if isString(f.Value) || (ok && typed.Type() == "string") {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %v)", f.DefValue)
			}
		}
		fmt.Fprint(fs.Output(), b.String(), "\n")
	})
}

// isString reports the flag package's string values (their defaults are
// quoted in the usage).
func isString(v flag.Value) bool {
	g, ok := v.(flag.Getter)
	if !ok {
		return false
	}
	_, str := g.Get().(string)
	return str
}

// isZeroValue reports whether f's default is its type's zero value (not
// shown in the usage), as the flag package decides it — also when the zero
// value's String panics (component-base's map flags over a nil map):
// then an empty default is the zero one.
func isZeroValue(f *flag.Flag) (zero bool) {
	defer func() {
		if recover() != nil {
			zero = f.DefValue == ""
		}
	}()
	typ := reflect.TypeOf(f.Value)
	var z reflect.Value
	if typ.Kind() == reflect.Pointer {
		z = reflect.New(typ.Elem())
	} else {
		z = reflect.Zero(typ)
	}
	return f.DefValue == z.Interface().(flag.Value).String()
}
