// Package strictdecode fills Go structs from a generic YAML or JSON tree
// (maps, lists and scalars, as YAML and JSON decoders produce them),
// strictly: every unknown key and every type mismatch is reported, all at
// once, under its path in the document, e.g. "workloads[1].podTmplatePath".
// Keys are the fields' json tags.
package strictdecode

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
)

// ValueDecoder is implemented by schema types whose file form is not plain
// JSON, e.g. durations written as bare numbers.
type ValueDecoder interface {
	DecodeValue(v interface{}) error
}

// ErrUnknownField is reported for a key the schema does not have.
var ErrUnknownField = errors.New("unknown field")

// Decode fills target, a pointer to a struct, from the tree v, reporting
// every problem to report under its path, and leaving the zero value where
// one is found (or where v holds null). It walks the schema itself, rather
// than using encoding/json, so that every problem is reported at once and
// names its place.
func Decode(v interface{}, target interface{}, report func(path string, err error)) {
	decodeInto(report, "", v, reflect.ValueOf(target).Elem())
}

func decodeInto(report func(path string, err error), path string, v interface{}, rv reflect.Value) {
	if v == nil {
		return // null reads as absent: the zero value stays
	}
	if d, ok := rv.Addr().Interface().(ValueDecoder); ok {
		if err := d.DecodeValue(v); err != nil {
			report(path, err)
		}
		return
	}
	mismatch := func(want string) {
		report(path, fmt.Errorf("must be %s, got %s", want, Describe(v)))
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
				report(joinPath(path, k), ErrUnknownField)
				continue
			}
			decodeInto(report, joinPath(path, k), m[k], rv.Field(i))
		}
	case reflect.Slice:
		list, ok := v.([]interface{})
		if !ok {
			mismatch("a list")
			return
		}
		s := reflect.MakeSlice(rv.Type(), len(list), len(list))
		for i, elem := range list {
			decodeInto(report, fmt.Sprintf("%s[%d]", path, i), elem, s.Index(i))
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
		f, ok := AsFloat(v)
		if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 || rv.OverflowInt(int64(f)) {
			mismatch("an integer")
			return
		}
		rv.SetInt(int64(f))
	case reflect.Float64:
		f, ok := AsFloat(v)
		if !ok {
			mismatch("a number")
			return
		}
		rv.SetFloat(f)
	default:
		panic(fmt.Sprintf("strictdecode: unsupported type %s at %s", rv.Type(), path))
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

// AsFloat converts the number types YAML and JSON decoders produce.
func AsFloat(v interface{}) (float64, bool) {
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

// Describe names a value's type, and shows scalars, for error messages.
func Describe(v interface{}) string {
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
