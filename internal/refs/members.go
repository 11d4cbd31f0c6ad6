package refs

import (
	"errors"
)

// Members finds in an object of a source kind whose objects are members of
// sources (lifecycle updatesOnly, such as the CSI driver's
// SecretProviderClassPodStatuses) the name of the source it is a member
// of, and its data as a list of items, each a key and a value. It is
// immutable and safe for concurrent use.
type Members struct {
	name       Path
	items      Path
	key, value Path
}

// CompileMembers compiles the paths of such a kind: nameFrom to the
// source's name, itemsPath to the items ([*] for each element of a list),
// key and value from an item to its key and value. Every problem is a
// *FieldError naming its field (nameFrom, items.path, items.key,
// items.value), joined with errors.Join.
func CompileMembers(nameFrom, itemsPath, key, value string) (*Members, error) {
	var errs []error
	parse := func(field, s string, wildcard bool) Path {
		if s == "" {
			errs = append(errs, &FieldError{Field: field, Err: errors.New("required")})
			return Path{}
		}
		p, err := ParsePath(s)
		if err == nil && !wildcard && p.HasWildcard() {
			err = errors.New("must not contain [*]: it reads one value")
		}
		if err != nil {
			errs = append(errs, &FieldError{Field: field, Err: err})
		}
		return p
	}
	m := &Members{
		name:  parse("nameFrom", nameFrom, false),
		items: parse("items.path", itemsPath, true),
		key:   parse("items.key", key, false),
		value: parse("items.value", value, false),
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
