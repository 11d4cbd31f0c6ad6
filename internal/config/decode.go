package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// valueDecoder is implemented by schema types whose file form is not plain
// JSON, e.g. durations written as bare numbers.
type valueDecoder interface {
	decodeValue(v interface{}) error
}

var errUnknownField = errors.New("unknown field")

// decodeInto fills rv from the generic YAML value v, reporting every unknown
// key and type mismatch under its path in the file. We walk the schema
// ourselves, rather than using encoding/json, so that every problem is
// reported at once and names its place, e.g. "workloads[1].podTmplatePath".
func decodeInto(p *problems, path string, v interface{}, rv reflect.Value) {
	if v == nil {
		return // null reads as absent: the zero value stays
	}
	if d, ok := rv.Addr().Interface().(valueDecoder); ok {
		if err := d.decodeValue(v); err != nil {
			p.decodeFailed(path, err)
		}
		return
	}
	mismatch := func(want string) {
		p.decodeFailed(path, fmt.Errorf("must be %s, got %s", want, describe(v)))
	}
	switch rv.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]interface{})
		if !ok {
			mismatch("a map")
			return
		}
		fields := jsonFields(rv.Type())
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			i, ok := fields[k]
			if !ok {
				p.decodeFailed(joinPath(path, k), errUnknownField)
				continue
			}
			decodeInto(p, joinPath(path, k), m[k], rv.Field(i))
		}
	case reflect.Slice:
		list, ok := v.([]interface{})
		if !ok {
			mismatch("a list")
			return
		}
		s := reflect.MakeSlice(rv.Type(), len(list), len(list))
		for i, elem := range list {
			decodeInto(p, fmt.Sprintf("%s[%d]", path, i), elem, s.Index(i))
		}
		rv.Set(s)
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			mismatch("a string")
			return
		}
		rv.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			mismatch("a boolean")
			return
		}
		rv.SetBool(b)
	case reflect.Int:
		f, ok := asFloat(v)
		if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 || rv.OverflowInt(int64(f)) {
			mismatch("an integer")
			return
		}
		rv.SetInt(int64(f))
	case reflect.Float64:
		f, ok := asFloat(v)
		if !ok {
			mismatch("a number")
			return
		}
		rv.SetFloat(f)
	default:
		panic(fmt.Sprintf("config schema: unsupported type %s at %s", rv.Type(), path))
	}
}

// jsonFields maps the json tag names of t's fields to field indexes.
func jsonFields(t reflect.Type) map[string]int {
	fields := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			fields[name] = i
		}
	}
	return fields
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// asFloat converts the number types YAML and JSON decoders produce.
func asFloat(v interface{}) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// describe names a value's type, and shows scalars, for error messages.
func describe(v interface{}) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("string %q", x)
	case bool:
		return fmt.Sprintf("boolean %v", x)
	case int, int64, uint64, float64:
		return fmt.Sprintf("number %v", x)
	case map[string]interface{}:
		return "a map"
	case []interface{}:
		return "a list"
	}
	return fmt.Sprintf("%T", v)
}

// Problem is one problem of a configuration, under the path of the key it
// concerns, e.g. "workloads[2].podTemplatePath".
type Problem struct {
	Path string
	// Origin says where the value came from when not the config file, e.g.
	// "env WORKERS": a path alone points at the file.
	Origin string
	Err    error
}

func (p Problem) Error() string {
	if p.Origin != "" {
		return p.Path + " (" + p.Origin + "): " + p.Err.Error()
	}
	return p.Path + ": " + p.Err.Error()
}

func (p Problem) Unwrap() error { return p.Err }

// problems collects every problem found in a configuration.
type problems struct {
	list []Problem
	// undecodable holds paths whose value failed to decode; checks on what
	// was decoded there would only repeat the problem.
	undecodable map[string]bool
	// origins maps keys layered from elsewhere than the file to their origin.
	origins map[string]string
}

func newProblems(origins map[string]string, earlier []Problem) *problems {
	if origins == nil {
		origins = map[string]string{}
	}
	return &problems{list: append([]Problem(nil), earlier...), undecodable: map[string]bool{}, origins: origins}
}

func (p *problems) decodeFailed(path string, err error) {
	p.undecodable[path] = true
	p.list = append(p.list, Problem{Path: path, Err: err})
}

// add reports a validation problem, unless decoding already failed there.
func (p *problems) add(path string, err error) {
	for failed := range p.undecodable {
		if within(path, failed) {
			return
		}
	}
	p.list = append(p.list, Problem{Path: path, Err: err})
}

// failedWithin reports whether decoding failed at path or anywhere below it.
func (p *problems) failedWithin(path string) bool {
	for failed := range p.undecodable {
		if within(failed, path) {
			return true
		}
	}
	return false
}

func (p *problems) addf(path, format string, args ...interface{}) {
	p.add(path, fmt.Errorf(format, args...))
}

// err returns every problem sorted by path, indexes in numeric order, or nil.
func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	list := append([]Problem(nil), p.list...)
	sort.SliceStable(list, func(i, j int) bool { return lessPath(list[i].Path, list[j].Path) })
	errs := make([]error, len(list))
	for i, pr := range list {
		if pr.Origin == "" {
			pr.Origin = p.originOf(pr.Path)
		}
		errs[i] = pr
	}
	return errors.Join(errs...)
}

func (p *problems) originOf(path string) string {
	for key, origin := range p.origins {
		if within(path, key) {
			return origin
		}
	}
	return ""
}

// within reports whether path is root or lies below it.
func within(path, root string) bool {
	return path == root || strings.HasPrefix(path, root) && strings.ContainsRune(".[", rune(path[len(root)]))
}

// lessPath orders paths naturally, so that "x[2]" sorts before "x[10]".
func lessPath(a, b string) bool {
	for a != "" && b != "" {
		ca, cb := chunk(a), chunk(b)
		if ca != cb {
			na, errA := strconv.Atoi(ca)
			nb, errB := strconv.Atoi(cb)
			if errA == nil && errB == nil {
				return na < nb
			}
			return ca < cb
		}
		a, b = a[len(ca):], b[len(cb):]
	}
	return len(a) < len(b)
}

// chunk returns s's leading run of digits, or of non-digits.
func chunk(s string) string {
	digit := func(c byte) bool { return c >= '0' && c <= '9' }
	i := 1
	for i < len(s) && digit(s[i]) == digit(s[0]) {
		i++
	}
	return s[:i]
}
