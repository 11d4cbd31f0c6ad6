package config

import (
	"errors"
	"fmt"

	"github.com/restart-controller/restart-controller/internal/refs"
)

// LifecycleUpdatesOnly is the sources[].lifecycle of a kind whose objects
// another controller creates and deletes with each pod: the CSI Secrets
// Store driver creates one SecretProviderClassPodStatus per pod and volume
// when the pod mounts it, and it goes away with the pod. A creation or a
// deletion of such an object is never a change (a restart would create new
// ones: a loop); only an update of one that existed is. Its objects are
// members of a source named by nameFrom (every pod's status object of one
// SecretProviderClass), and its data are items.
const LifecycleUpdatesOnly = "updatesOnly"

// Members is how the objects of a kind of lifecycle updatesOnly make up
// sources, compiled from nameFrom and items. It is immutable and safe for
// concurrent use.
type Members struct {
	name       refs.Path
	items      refs.Path
	key, value refs.Path
}

// NewMembers compiles the paths of a kind of lifecycle updatesOnly, as the
// config file's nameFrom and items name them; every problem is a
// *refs.FieldError naming its field, joined with errors.Join.
func NewMembers(nameFrom string, items FileSourceItems) (*Members, error) {
	var errs []error
	fail := func(field string, err error) { errs = append(errs, &refs.FieldError{Field: field, Err: err}) }
	parse := func(field, s string, wildcard bool) refs.Path {
		if s == "" {
			fail(field, errRequired)
			return refs.Path{}
		}
		p, err := refs.ParsePath(s)
		if err == nil && !wildcard && p.HasWildcard() {
			err = errors.New("must not contain [*]: it reads one value")
		}
		if err != nil {
			fail(field, err)
		}
		return p
	}
	m := &Members{
		name:  parse("nameFrom", nameFrom, false),
		items: parse("items.path", items.Path, true),
		key:   parse("items.key", items.Key, false),
		value: parse("items.value", items.Value, false),
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return m, nil
}

// NameFrom is the path to the name of the source an object is a member of.
func (m *Members) NameFrom() string { return m.name.String() }

// Name returns the name of the source obj is a member of; false when the
// object names none (not filled in yet, or not a string).
func (m *Members) Name(obj map[string]interface{}) (string, bool) {
	v, _ := m.name.Value(obj)
	s, ok := v.(string)
	return s, ok && s != ""
}

// Items calls fn with the key and value of every item of obj. An item
// without a key (missing, empty or not a string) or without a value is
// skipped: it names nothing a pod reads.
func (m *Members) Items(obj map[string]interface{}, fn func(key string, value interface{})) {
	m.items.Each(obj, func(item interface{}) {
		k, _ := m.key.Value(item)
		key, ok := k.(string)
		if !ok || key == "" {
			return
		}
		if value, found := m.value.Value(item); found && value != nil {
			fn(key, value)
		}
	})
}

// compileMembers checks the fields of a source kind that depend on its
// lifecycle and returns its Members (nil for the default lifecycle).
func compileMembers(path string, k FileSourceKind, p *problems) *Members {
	switch k.Lifecycle {
	case "":
		if k.NameFrom != "" {
			p.addf(path+".nameFrom", "only with lifecycle: %s", LifecycleUpdatesOnly)
		}
		if k.Items != (FileSourceItems{}) {
			p.addf(path+".items", "only with lifecycle: %s; a kind's data are its dataFields otherwise", LifecycleUpdatesOnly)
		}
		return nil
	case LifecycleUpdatesOnly:
	default:
		p.addf(path+".lifecycle", "must be empty or %q, got %q", LifecycleUpdatesOnly, k.Lifecycle)
		return nil
	}
	if len(k.DataFields) > 0 {
		p.addf(path+".dataFields", "must be left out with lifecycle: %s, whose data are its items", LifecycleUpdatesOnly)
	}
	m, err := NewMembers(k.NameFrom, k.Items)
	for _, err := range unjoin(err) {
		var fe *refs.FieldError
		if errors.As(err, &fe) {
			p.add(fmt.Sprintf("%s.%s", path, fe.Field), fe.Err)
		}
	}
	return m
}
