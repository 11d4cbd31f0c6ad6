package watch

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// Workloads of kinds client-go does not know (CRDs) arrive in JSON (the
// dynamic client; workloadInformer), and about half of a typical
// workload's JSON is metadata.managedFields: server-side apply's
// record of who set which field, a tree of small maps that decoding into
// an unstructured object allocates one by one, and that the transform
// throws away at once (nothing here reads it). The workload informers'
// client therefore cuts that member out of each object's bytes before
// they are decoded: at 10,000 workloads this halves the bytes the list
// and every watch event decode (BENCHMARKS.md). Everything else reaches
// the decoder unchanged.

// leanDynamicClient returns a dynamic client like dynamic.NewForConfig's
// whose JSON decoding leaves out metadata.managedFields.
func leanDynamicClient(rc *rest.Config) (*dynamic.DynamicClient, error) {
	cfg := dynamic.ConfigFor(rc)
	// As dynamic.NewForConfigAndClient sets them: the dynamic client builds
	// every path itself.
	cfg.GroupVersion = nil
	cfg.APIPath = "/if-you-see-this-search-for-the-break"
	cfg.NegotiatedSerializer = withoutManagedFields{cfg.NegotiatedSerializer}
	c, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the workloads' client: %w", err)
	}
	return dynamic.New(c), nil
}

// withoutManagedFields wraps the dynamic client's serializers so that JSON
// objects and lists are decoded without metadata.managedFields. Watch
// events are decoded in two steps (the event, then its object) and the
// object's step goes through the wrapped decoder too.
type withoutManagedFields struct{ runtime.NegotiatedSerializer }

func (n withoutManagedFields) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := append([]runtime.SerializerInfo(nil), n.NegotiatedSerializer.SupportedMediaTypes()...)
	for i := range infos {
		if infos[i].MediaType == runtime.ContentTypeJSON && infos[i].Serializer != nil {
			infos[i].Serializer = managedFieldsCutter{infos[i].Serializer}
		}
	}
	return infos
}

type managedFieldsCutter struct{ runtime.Serializer }

func (c managedFieldsCutter) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	return c.Serializer.Decode(cutManagedFields(data), gvk, into)
}

// cutManagedFields returns the JSON of an object, or of a list of objects
// ("items"), without the managedFields member of the object's metadata (of
// each item's). Only those places are touched: a pod template's metadata
// is part of what its hash covers. When the input is not what is expected
// (not a JSON object, malformed) it is returned as it is, for the decoder
// to judge; the input is never changed.
func cutManagedFields(data []byte) []byte {
	s := jsonScanner{data: data}
	var edits []metadataEdit
	metadata := func() bool {
		if s.peek() != '{' {
			return s.skipValue()
		}
		e := metadataEdit{start: s.pos}
		ok := s.object(func(key []byte, start int) bool {
			if !s.skipValue() {
				return false
			}
			if string(key) == "managedFields" {
				e.cut = true
			} else {
				e.kept = append(e.kept, [2]int{start, s.pos})
			}
			return true
		})
		e.end = s.pos
		if ok && e.cut {
			edits = append(edits, e)
		}
		return ok
	}
	ok := s.object(func(key []byte, _ int) bool {
		switch string(key) {
		case "metadata":
			return metadata()
		case "items":
			if s.peek() != '[' {
				return s.skipValue()
			}
			return s.array(func() bool {
				return s.object(func(key []byte, _ int) bool {
					if string(key) == "metadata" {
						return metadata()
					}
					return s.skipValue()
				})
			})
		}
		return s.skipValue()
	})
	if !ok || len(edits) == 0 {
		return data
	}
	out := make([]byte, 0, len(data))
	last := 0
	for _, e := range edits {
		out = append(out, data[last:e.start]...)
		out = append(out, '{')
		for i, m := range e.kept {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, data[m[0]:m[1]]...)
		}
		out = append(out, '}')
		last = e.end
	}
	return append(out, data[last:]...)
}

// metadataEdit is a metadata object to write again without managedFields:
// where it is, and the members kept.
type metadataEdit struct {
	start, end int
	kept       [][2]int
	cut        bool
}

// jsonScanner walks JSON just enough to find members and skip values.
type jsonScanner struct {
	data []byte
	pos  int
}

func (s *jsonScanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next byte that is not white space, or 0 at the end.
func (s *jsonScanner) peek() byte {
	s.space()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// str reads a string and returns its raw contents (escapes left as they
// are: a key with escapes matches no name looked for, so nothing is cut).
func (s *jsonScanner) str() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	start := s.pos + 1
	for i := start; i < len(s.data); i++ {
		switch s.data[i] {
		case '\\':
			i++
		case '"':
			s.pos = i + 1
			return s.data[start:i], true
		}
	}
	return nil, false
}

// skipValue skips any one value.
func (s *jsonScanner) skipValue() bool {
	switch s.peek() {
	case '"':
		_, ok := s.str()
		return ok
	case '{':
		return s.object(func([]byte, int) bool { return s.skipValue() })
	case '[':
		return s.array(s.skipValue)
	case 0, ',', ':', '}', ']':
		return false
	}
	// A number, true, false or null.
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return true
		}
		s.pos++
	}
	return true
}

// object reads an object: value is called at each member's value, with
// its key and where the member starts, and must consume the value.
func (s *jsonScanner) object(value func(key []byte, start int) bool) bool {
	if s.peek() != '{' {
		return false
	}
	s.pos++
	if s.peek() == '}' {
		s.pos++
		return true
	}
	for {
		start := s.pos
		key, ok := s.str()
		if !ok || s.peek() != ':' {
			return false
		}
		s.pos++
		if !value(key, start) {
			return false
		}
		switch s.peek() {
		case ',':
			s.pos++
			s.space()
		case '}':
			s.pos++
			return true
		default:
			return false
		}
	}
}

// array reads an array; value must consume each element.
func (s *jsonScanner) array(value func() bool) bool {
	if s.peek() != '[' {
		return false
	}
	s.pos++
	if s.peek() == ']' {
		s.pos++
		return true
	}
	for {
		if !value() {
			return false
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return true
		default:
			return false
		}
	}
}
