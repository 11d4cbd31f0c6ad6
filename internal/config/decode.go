package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/v2"
)

// errUnknownField is reported for a key the schema does not have.
var errUnknownField = errors.New("unknown field")

// valueDecoder is implemented by schema types whose file form is not plain
// JSON, e.g. durations written as bare numbers.
type valueDecoder interface {
	DecodeValue(v interface{}) error
}

// invalidKeys starts the message of mapstructure's ErrorUnused error.
const invalidKeys = "has invalid keys: "

// decodeFile fills f from the layered tree with koanf's own decoding
// (mapstructure: it walks the schema by json tags, continues past every
// problem, and names each one's path, e.g. "references[1]"), and reports
// every problem under its path. An error is returned only when the decoder
// could not run at all.
//
// What mapstructure does not do as this schema needs is kept here, thin:
//   - It reports the unknown keys of one map in one error on the map's path,
//     "'references[1]' has invalid keys: nmae, sourc". That error is split
//     into one problem per key, "references[1].nmae: unknown field", so each
//     stands under its own path as every other problem does. (A key that
//     itself holds ", " is split as well, still under its map's path.)
//   - It converts without asking and names Go types. Alone it decodes
//     "workers: 1.5" as 1 (a float truncated into an int), and says of
//     "waves: []" "'waves' expected a map or struct, got \"slice\"" and of
//     "restartGracePeriod: soon" "expected type 'config.SecondsOrDuration',
//     got unconvertible type 'string'". checkValue, a decode hook, checks
//     each value's kind first and says what the file must hold ("waves:
//     must be a map, got a list"), and runs the schema's valueDecoders
//     ("restartGracePeriod: must be a number of seconds or a Go duration
//     like \"500ms\", got string \"soon\"").
func decodeFile(k *koanf.Koanf, f *File, report func(path string, err error)) error {
	err := k.UnmarshalWithConf("", f, koanf.UnmarshalConf{Tag: "json", DecoderConfig: &mapstructure.DecoderConfig{
		DecodeHook:  checkValue,
		ErrorUnused: true,
		// Keys match their json tag exactly: mapstructure would otherwise
		// take "Workers" for "workers".
		MatchName:            func(key, field string) bool { return key == field },
		IgnoreUntaggedFields: true,
	}})
	return reportDecodeErrors(err, report)
}

// reportDecodeErrors reports each of mapstructure's errors (a tree of
// errors.Join and DecodeErrors) under its path, and returns any other.
func reportDecodeErrors(err error, report func(path string, err error)) error {
	switch e := err.(type) {
	case nil:
		return nil
	case interface{ Unwrap() []error }:
		var others []error
		for _, e := range e.Unwrap() {
			others = append(others, reportDecodeErrors(e, report))
		}
		return errors.Join(others...)
	case *mapstructure.DecodeError:
		inner := e.Unwrap()
		switch inner.(type) {
		case interface{ Unwrap() []error }, *mapstructure.DecodeError:
			return reportDecodeErrors(inner, report)
		}
		if keys, ok := strings.CutPrefix(inner.Error(), invalidKeys); ok {
			for _, key := range strings.Split(keys, ", ") {
				report(joinPath(e.Name(), key), errUnknownField)
			}
			return nil
		}
		report(e.Name(), inner)
		return nil
	}
	// Decode puts several errors under one message of its own.
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		return reportDecodeErrors(joined.(error), report)
	}
	return fmt.Errorf("decoding the configuration: %w", err)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// checkValue is the decode hook: it runs a valueDecoder, and refuses a value
// of the wrong kind for its field, as mapstructure, which converts, would
// not.
func checkValue(from, to reflect.Value) (interface{}, error) {
	v := from.Interface()
	if d, ok := reflect.New(to.Type()).Interface().(valueDecoder); ok {
		if err := d.DecodeValue(v); err != nil {
			return nil, err
		}
		return reflect.ValueOf(d).Elem().Interface(), nil
	}
	mismatch := func(want string) error { return fmt.Errorf("must be %s, got %s", want, describe(v)) }
	switch to.Kind() {
	case reflect.Struct:
		if _, ok := v.(map[string]interface{}); !ok {
			return nil, mismatch("a map")
		}
	case reflect.Slice:
		if _, ok := v.([]interface{}); !ok {
			return nil, mismatch("a list")
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			return nil, mismatch("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return nil, mismatch("a boolean")
		}
	case reflect.Int:
		f, ok := asFloat(v)
		if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return nil, mismatch("an integer")
		}
		return int(f), nil
	case reflect.Float64:
		f, ok := asFloat(v)
		if !ok {
			return nil, mismatch("a number")
		}
		return f, nil
	}
	return v, nil
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
