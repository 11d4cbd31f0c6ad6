package refs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Path is a compiled JSONPath-style path into unstructured JSON data, such as
// "containers[*].env[*].valueFrom.configMapKeyRef". It is a value type: its
// segments are never changed after ParsePath, so copies may be shared freely.
// The zero Path reaches the object it is applied to.
type Path struct {
	segs []segment
}

// segment is one field step, optionally fanning out over every list element.
type segment struct {
	name string
	each bool // "[*]": the field is a list and every element is visited
}

// ParsePath compiles s. A leading "$." or "." is accepted for readers used to
// JSONPath; only field names and "[*]" are supported, because that is all a
// pod spec reference needs and anything richer would be untested surface.
func ParsePath(s string) (Path, error) {
	i := 0
	switch {
	case strings.HasPrefix(s, "$."):
		i = 2
	case strings.HasPrefix(s, "."):
		i = 1
	}
	if i == len(s) {
		return Path{}, errors.New("empty path")
	}
	var segs []segment
	for {
		start := i
		for i < len(s) && isNameChar(s[i]) {
			i++
		}
		if i == start {
			if i == len(s) || s[i] == '.' {
				return Path{}, fmt.Errorf("empty segment at offset %d", i)
			}
			return Path{}, unexpected(s, i)
		}
		seg := segment{name: s[start:i]}
		if i < len(s) && s[i] == '[' {
			if !strings.HasPrefix(s[i:], "[*]") {
				return Path{}, fmt.Errorf("unexpected character '[' at offset %d: only [*] is supported", i)
			}
			seg.each = true
			i += len("[*]")
		}
		segs = append(segs, seg)
		if i == len(s) {
			return Path{segs: segs}, nil
		}
		if s[i] != '.' {
			return Path{}, unexpected(s, i)
		}
		i++
	}
}

// MustParsePath is ParsePath for paths written in Go source; it panics on error.
func MustParsePath(s string) Path {
	p, err := ParsePath(s)
	if err != nil {
		panic(fmt.Sprintf("refs.MustParsePath(%q): %v", s, err))
	}
	return p
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func unexpected(s string, i int) error {
	r := []rune(s[i:])[0]
	return fmt.Errorf("unexpected character %q at offset %d", r, i)
}

// String returns the canonical form, without a leading "$.", so that paths
// compare and print the same however they were written.
func (p Path) String() string {
	var b strings.Builder
	for i, s := range p.segs {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.name)
		if s.each {
			b.WriteString("[*]")
		}
	}
	return b.String()
}

// HasWildcard reports whether the path can reach more than one value.
func (p Path) HasWildcard() bool {
	for _, s := range p.segs {
		if s.each {
			return true
		}
	}
	return false
}

// Each calls fn with every value the path reaches in obj, in document order.
// Missing fields, nulls and values of the wrong type reach nothing: the data
// comes from the API server and from CRDs whose schema we do not control.
func (p Path) Each(obj interface{}, fn func(interface{})) {
	walk(obj, p.segs, fn)
}

// Object returns the map at a wildcard-free path, e.g. a workload's pod template.
func (p Path) Object(obj map[string]interface{}) (map[string]interface{}, bool) {
	v, ok := p.Value(obj)
	if !ok {
		return nil, false
	}
	m, ok := v.(map[string]interface{})
	return m, ok
}

// Value returns the single value a wildcard-free path reaches. ok is false
// when nothing is there, or when the path has a wildcard.
func (p Path) Value(obj interface{}) (v interface{}, ok bool) {
	if p.HasWildcard() {
		return nil, false
	}
	walk(obj, p.segs, func(x interface{}) { v, ok = x, true })
	return v, ok
}

// walk visits what segs reach from v and reports false if it met a value of
// the wrong type on the way, so that callers can tell "absent" from "malformed".
func walk(v interface{}, segs []segment, fn func(interface{})) bool {
	if v == nil {
		return true
	}
	if len(segs) == 0 {
		fn(v)
		return true
	}
	m, ok := v.(map[string]interface{})
	if !ok {
		return false
	}
	child := m[segs[0].name]
	if !segs[0].each {
		return walk(child, segs[1:], fn)
	}
	if child == nil {
		return true
	}
	list, ok := child.([]interface{})
	if !ok {
		return false
	}
	wellFormed := true
	for _, elem := range list {
		if !walk(elem, segs[1:], fn) {
			wellFormed = false
		}
	}
	return wellFormed
}

// eachPlace is walk for explaining a reference: it also names the place
// each value sits, the fields passed joined by "." and each element of a
// fanned-out list by its "name" field or else its index, as in
// "containers[app].envFrom[0].configMapRef". It is apart from walk so that
// the controller's extraction builds no names it would throw away.
func eachPlace(v interface{}, segs []segment, place string, fn func(place string, v interface{})) {
	if v == nil {
		return
	}
	if len(segs) == 0 {
		fn(place, v)
		return
	}
	m, ok := v.(map[string]interface{})
	if !ok {
		return
	}
	if place != "" {
		place += "."
	}
	place += segs[0].name
	child := m[segs[0].name]
	if !segs[0].each {
		eachPlace(child, segs[1:], place, fn)
		return
	}
	list, ok := child.([]interface{})
	if !ok {
		return
	}
	for i, elem := range list {
		eachPlace(elem, segs[1:], place+"["+elementID(elem, i)+"]", fn)
	}
}

// elementID names a list element as a reader of the pod spec would: by its
// "name" field (containers, volumes, env vars all have one), else its index.
func elementID(elem interface{}, index int) string {
	if m, ok := elem.(map[string]interface{}); ok {
		if name, ok := m["name"].(string); ok && name != "" {
			return name
		}
	}
	return strconv.Itoa(index)
}
