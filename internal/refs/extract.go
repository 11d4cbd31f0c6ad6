package refs

import (
	"errors"
	"fmt"
	"slices"
)

// Spec is one reference form as written in the config file's "references" list.
type Spec struct {
	// Source is the source kind's name, e.g. "configmap".
	Source string `json:"source"`
	// From are paths from the pod spec to the objects holding a reference,
	// e.g. "volumes[*].configMap".
	From []string `json:"from"`
	// Name is the path inside a reference object to the source object's name.
	Name string `json:"name"`
	// Keys is the path inside a reference object to the keys it reads. When it
	// reaches no keys the whole object is read, as Kubernetes does for a missing
	// or empty "items" list.
	Keys string `json:"keys,omitempty"`
	// Optional is the path inside a reference object to its "optional" bool.
	Optional string `json:"optional,omitempty"`
}

// FieldError is a problem with one field of a Spec. Field is relative to the
// Spec (e.g. "from[1]") so the caller can prefix where the Spec itself sits.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// Extractor finds the references of one Spec in pod specs. It is immutable
// and safe for concurrent use.
type Extractor struct {
	source   string
	from     []Path
	name     Path
	keys     *Path
	optional *Path
}

// Compile checks spec and compiles its paths. Every problem is reported, as
// *FieldError values joined with errors.Join.
func Compile(spec Spec) (*Extractor, error) {
	var errs []error
	fail := func(field string, err error) {
		errs = append(errs, &FieldError{Field: field, Err: err})
	}
	e := &Extractor{source: spec.Source}
	if spec.Source == "" {
		fail("source", errors.New("required"))
	}
	if len(spec.From) == 0 {
		fail("from", errors.New("required"))
	}
	for i, s := range spec.From {
		p, err := ParsePath(s)
		if err != nil {
			fail(fmt.Sprintf("from[%d]", i), err)
			continue
		}
		e.from = append(e.from, p)
	}
	// Name and Optional are single values; a wildcard there has no meaning.
	single := func(field, s string) *Path {
		p, err := ParsePath(s)
		if err == nil && p.HasWildcard() {
			err = errors.New("must not contain [*]")
		}
		if err != nil {
			fail(field, err)
			return nil
		}
		return &p
	}
	if spec.Name == "" {
		fail("name", errors.New("required"))
	} else if p := single("name", spec.Name); p != nil {
		e.name = *p
	}
	if spec.Keys != "" {
		if p, err := ParsePath(spec.Keys); err != nil {
			fail("keys", err)
		} else {
			e.keys = &p
		}
	}
	if spec.Optional != "" {
		e.optional = single("optional", spec.Optional)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return e, nil
}

// Source returns the name of the source kind the references point to.
func (e *Extractor) Source() string { return e.source }

// Extract appends to out the references found in podSpec and returns the
// extended slice. A reference object with a missing name, or with a field of
// the wrong type, is skipped: it cannot name anything the pod could read.
func (e *Extractor) Extract(podSpec map[string]interface{}, out []Ref) []Ref {
	for _, from := range e.from {
		from.Each(podSpec, func(v interface{}) {
			if ref, ok := e.ref(v); ok {
				out = append(out, ref)
			}
		})
	}
	return out
}

// Placed is a reference with where it was found, for explaining it.
type Placed struct {
	Ref
	// Spec is the index of the extractor that found it in the list passed to
	// ExtractPlaces: the config file's references[Spec] when that list is the
	// compiled config's.
	Spec int
	// Place is where the reference object sits in the pod spec, list
	// elements named by their "name" field or else their index:
	// "containers[app].env[COLOR].valueFrom.configMapKeyRef".
	Place string
}

// ExtractPlaces finds the references of every extractor in podSpec, the
// same and in the same order as Extract on each in turn, and says which
// extractor found each and where. It is a call of its own, not an option of
// Extract, so that the controller's extraction builds no places.
func ExtractPlaces(extractors []*Extractor, podSpec map[string]interface{}) []Placed {
	var out []Placed
	for i, e := range extractors {
		for _, from := range e.from {
			eachPlace(podSpec, from.segs, "", func(place string, v interface{}) {
				if ref, ok := e.ref(v); ok {
					out = append(out, Placed{Ref: ref, Spec: i, Place: place})
				}
			})
		}
	}
	return out
}

// ref reads the reference object v; false when v is not one (not a map) or
// is malformed, as Extract says.
func (e *Extractor) ref(v interface{}) (Ref, bool) {
	obj, ok := v.(map[string]interface{})
	if !ok {
		return Ref{}, false
	}
	named, _ := e.name.Value(obj)
	name, ok := named.(string)
	if !ok || name == "" {
		return Ref{}, false
	}
	ref := Ref{Kind: e.source, Name: name}
	if e.keys != nil {
		if ref.Keys, ok = keysAt(*e.keys, obj); !ok {
			return Ref{}, false
		}
	}
	if e.optional != nil {
		if v, found := e.optional.Value(obj); found {
			if ref.Optional, ok = v.(bool); !ok {
				return Ref{}, false
			}
		}
	}
	return ref, true
}

// keysAt returns the sorted, distinct keys p reaches in obj, nil when there
// are none, and false when the data is malformed.
func keysAt(p Path, obj map[string]interface{}) ([]string, bool) {
	var keys []string
	valid := true
	wellFormed := walk(obj, p.segs, func(v interface{}) {
		k, ok := v.(string)
		valid = valid && ok && k != ""
		keys = append(keys, k)
	})
	if !wellFormed || !valid {
		return nil, false
	}
	slices.Sort(keys)
	return slices.Compact(keys), true
}
