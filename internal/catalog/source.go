// Package catalog holds what the controller knows about sources and workloads:
// reduced objects kept by the informers' caches, and the lookups decisions need.
// Objects are reduced when they enter the cache, so memory follows the number of
// objects, not the bytes of source data they carry.
package catalog

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"sort"
	"strings"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/objmeta"
)

// SourceID names a source object the way the applied-checksums annotation does:
// "configmap/NS/NAME".
type SourceID struct {
	Kind      string
	Namespace string
	Name      string
}

func (id SourceID) String() string { return id.Kind + "/" + id.Namespace + "/" + id.Name }

// ParseSourceID reads "KIND/NAMESPACE/NAME" (SourceID.String), as
// checksums, records and holds name sources.
func ParseSourceID(s string) (SourceID, bool) {
	parts := strings.SplitN(s, "/", 3)
	if len(parts) != 3 {
		return SourceID{}, false
	}
	return SourceID{Kind: parts[0], Namespace: parts[1], Name: parts[2]}, true
}

// SourceState is what the cache keeps of a source object: identity and one
// digest per key, never the data itself. A source with more keys than
// MaxDigestKeys (or longer key names than MaxDigestKeyBytes) keeps instead
// the checksums of its whole data (Whole), so its cost does not grow with
// its keys; the digests of the keys a workload reads of it are then read on
// demand (WithKeys) into a copy that holds only those.
type SourceState struct {
	objmeta.Type
	objmeta.Meta `json:"metadata"`
	// Digests digest each key's value alone (the value's text, as JSON
	// carries it). For a large source (Whole set), only the keys of covered
	// that exist, or nil.
	Digests checksum.Digests `json:"digests"`
	// Fields names the data field of each key that is not in "data", e.g.
	// "binaryData": the same bytes are another file there. Nil when every key
	// is in "data", as in most ConfigMaps and every Secret, so the common case
	// costs no memory.
	Fields map[string]string `json:"fields,omitempty"`
	// Whole is set for a large source: what reads of the whole object
	// compare, computed when the object entered the cache.
	Whole *checksum.WholeSums `json:"whole,omitempty"`
	// covered lists, sorted, the keys whose digests a large source's state
	// holds (present in Digests, or absent from the data): those a keyed
	// read may ask for (Covers). Only a state made for a read has them
	// (WithKeys): a pointer, 8 bytes where a slice is 24 in every state.
	covered *[]string
	// Baseline marks the state of a source of lifecycle updatesOnly none
	// of whose members was updated since its creation (members.Group): decisions
	// only fill a missing record with it.
	Baseline bool `json:"baseline,omitempty"`
}

// DeepCopyObject is required of cached objects; digests are never mutated in
// place, but the mutation detector of client-go may compare copies.
func (c *SourceState) DeepCopyObject() runtime.Object {
	out := &SourceState{Type: c.Type, Baseline: c.Baseline}
	c.Meta.DeepCopyInto(&out.Meta)
	// nil stays nil (slices.Clone and maps.Clone keep it): the mutation
	// detector compares with reflect.DeepEqual.
	out.Digests = slices.Clone(c.Digests)
	out.Fields = maps.Clone(c.Fields)
	if c.Whole != nil {
		whole := *c.Whole
		out.Whole = &whole
	}
	if c.covered != nil {
		covered := append([]string{}, *c.covered...)
		out.covered = &covered
	}
	return out
}

// SameData reports whether two states carry identical data, each key in the
// same field; metadata-only changes (labels, annotations) compare equal.
func (c *SourceState) SameData(other *SourceState) bool {
	if c.Whole != nil || other.Whole != nil {
		// A large source is compared by the digest of all its data; the
		// other state may be small (the source grew or shrank past the
		// bound), and its digest is then computed from its keys.
		return c.dataDigest() == other.dataDigest()
	}
	// Both sorted, each key once.
	return slices.Equal(c.Digests, other.Digests) && maps.Equal(c.Fields, other.Fields)
}

// ChangedKeys returns, sorted, the keys whose value or field differ between
// old and c (added and removed ones included); nil when either is a large
// source, whose keys are not kept one by one.
func (c *SourceState) ChangedKeys(old *SourceState) []string {
	if c.Whole != nil || old.Whole != nil {
		return nil
	}
	changed := []string{}
	for _, e := range c.Digests {
		if od, ok := old.Digests.Get(e.Key); !ok || od != e.Digest || old.field(e.Key) != c.field(e.Key) {
			changed = append(changed, e.Key)
		}
	}
	for _, e := range old.Digests {
		if _, ok := c.Digests.Get(e.Key); !ok {
			changed = append(changed, e.Key)
		}
	}
	sort.Strings(changed)
	return changed
}

// field returns the data field holding key.
func (c *SourceState) field(key string) string {
	if f, ok := c.Fields[key]; ok {
		return f
	}
	return defaultField
}

// defaultField is the data field of keys not listed in SourceState.Fields.
const defaultField = "data"

// Checksum is the current version's checksum (checksum.Hasher.Sum) of
// exactly the data a reference reads: the given keys (present or absent),
// or every key when keys is nil. Without a key (the zero Hasher) it is
// empty: nothing can be recorded.
//
// A large source's state answers every read of the whole object, and keyed
// reads of the keys it covers (Covers); for any other read it returns "",
// like a state without a key: callers read the keys first (WithKeys).
func (c *SourceState) Checksum(h checksum.Hasher, keys []string) string {
	if c.Whole != nil && keys == nil {
		return c.Whole.Sum(h)
	}
	if !c.Covers(keys) {
		return ""
	}
	return h.Sum(c.data(), keys)
}

// ChecksumOf computes an unkeyed checksum of an earlier format version, for
// comparing what earlier releases recorded; ok is false for other versions.
func (c *SourceState) ChecksumOf(version int, keys []string) (sum string, ok bool) {
	if c.Whole != nil && keys == nil {
		return c.Whole.Unkeyed(version)
	}
	if !c.Covers(keys) {
		return "", false
	}
	return checksum.Unkeyed(version, c.data(), keys)
}

// Matches reports whether a recorded checksum, of any version this build
// knows, describes the data the keys read now. A recorded checksum of an
// unknown version, or keyed with another key, never matches: it cannot be
// compared (checksum.Hasher.Rebaseline tells the second case apart).
func (c *SourceState) Matches(h checksum.Hasher, recorded string, keys []string) bool {
	switch v, keyID, _ := checksum.Parse(recorded); v {
	case 3:
		return keyID == h.KeyID() && h.KeyID() != "" && c.Checksum(h, keys) == recorded
	case 0:
		return false
	default:
		now, ok := c.ChecksumOf(v, keys)
		return ok && now == recorded
	}
}

// data is the state's per-key form as the checksum format reads it.
func (c *SourceState) data() checksum.Data { return (*stateData)(c) }

// stateData reads a SourceState's digests for the checksum format, without
// copying them.
type stateData SourceState

func (d *stateData) Len() int { return len(d.Digests) }

func (d *stateData) At(i int) (string, checksum.Digest) { return d.Digests[i].Key, d.Digests[i].Digest }

func (d *stateData) Lookup(key string) (checksum.Digest, bool) { return d.Digests.Get(key) }

func (d *stateData) Field(key string) string { return (*SourceState)(d).field(key) }

// ReduceSource returns an informer transform that replaces a source object by
// its SourceState, with one digest per key however many keys it has: what a
// test wants (explain and status use SourceReducer.Reduce). The controller's
// caches reduce through SourceReducer, which bounds what a source with many
// keys costs. The annotations named by keep are kept, the others dropped.
func ReduceSource(dataFields []string, keep ...string) cache.TransformFunc {
	return SourceReducer{DataFields: dataFields, Keep: keep}.Transform()
}

// SourceReducer reduces source objects as they enter a cache.
type SourceReducer struct {
	// DataFields are the top-level maps whose entries are hashed.
	DataFields []string
	// Bounded keeps per-key digests only for sources within MaxDigestKeys
	// and MaxDigestKeyBytes; a larger one keeps the checksums of its whole
	// data instead (SourceState.Whole), the keyed one under Sums.
	Bounded bool
	// Sums keys the whole-object checksums of large sources: it must be the
	// Hasher that decisions use.
	Sums checksum.Hasher
	// Keep names the annotations kept (the ignore and release annotations
	// of fleet safety); the others are dropped.
	Keep []string
}

// Transform returns the informer transform. Objects come as unstructured
// (dynamic client, JSON) or typed (protobuf client, for kinds client-go
// knows); both give the same digests, because applied checksums outlive any
// one way of fetching. Tombstones and already reduced objects pass through:
// client-go may hand an object over twice.
func (r SourceReducer) Transform() cache.TransformFunc {
	return func(obj interface{}) (interface{}, error) {
		switch o := obj.(type) {
		case *SourceState:
			return obj, nil
		case runtime.Object:
			state, err := r.Reduce(o)
			if err != nil {
				return nil, err
			}
			return state, nil
		default:
			return obj, nil
		}
	}
}

// Reduce reduces a decoded source object (unstructured or typed) to its
// SourceState: what Transform does to each object entering a cache, for
// the one-off readers (explain, status) that hold the object themselves.
func (r SourceReducer) Reduce(obj runtime.Object) (*SourceState, error) {
	fields, meta, err := dataFieldsOf(obj, r.DataFields)
	if err != nil {
		return nil, err
	}
	state := newSourceState(meta)
	state.Annotations = keptAnnotations(meta.GetAnnotations(), r.Keep)
	if u, ok := meta.(*unstructured.Unstructured); ok {
		state.Type = objmeta.TypeOf(u.GetAPIVersion(), u.GetKind())
	}
	if r.Bounded && tooManyKeys(fields) {
		state.Whole, _, _ = wholeSums(fields, r.Sums, nil)
		return state, nil
	}
	var b checksum.DigestsBuilder
	for _, f := range fields {
		for key := range f.keys {
			d, _ := f.digest(key)
			state.set(&b, key, f.name, d)
		}
	}
	state.Digests = b.Done()
	return state, nil
}

// dataField is one data field of a decoded source object, e.g. a ConfigMap's
// "binaryData": its keys, and each key's value digest, read from the object
// in place (no copy of a value is made).
type dataField struct {
	name   string
	len    int
	keys   iter.Seq[string]
	digest func(key string) (checksum.Digest, bool)
}

// typedFields picks, in the order of dataFields, the fields a typed object has.
func typedFields(dataFields []string, has map[string]dataField) []dataField {
	var fields []dataField
	for _, name := range dataFields {
		if f, ok := has[name]; ok {
			fields = append(fields, f)
		}
	}
	return fields
}

// dataFieldsOf returns the data fields of a decoded source object, in the
// order of dataFields, and the object's metadata.
func dataFieldsOf(obj runtime.Object, dataFields []string) ([]dataField, metav1.Object, error) {
	var fields []dataField
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return typedFields(dataFields, map[string]dataField{
			"data":       mapField("data", o.Data, checksum.DigestString),
			"binaryData": mapField("binaryData", o.BinaryData, checksum.DigestBase64),
		}), o, nil
	case *corev1.Secret:
		return typedFields(dataFields, map[string]dataField{
			"data":       mapField("data", o.Data, checksum.DigestBase64),
			"stringData": mapField("stringData", o.StringData, checksum.DigestString),
		}), o, nil
	case *unstructured.Unstructured:
		for _, name := range dataFields {
			if values, ok := o.Object[name].(map[string]interface{}); ok {
				fields = append(fields, mapField(name, values, checksum.DigestValue))
			}
		}
		return fields, o, nil
	default:
		// Another typed kind: convert, which is what the JSON path sees.
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, nil, fmt.Errorf("reducing %T: %w", o, err)
		}
		return dataFieldsOf(&unstructured.Unstructured{Object: content}, dataFields)
	}
}

// mapField is a data field of values digested by digest. Byte values are
// digested as their base64 text (checksum.DigestBase64), which is what JSON carries
// for them, so both ways of fetching agree.
func mapField[V any](name string, values map[string]V, digest func(V) checksum.Digest) dataField {
	return dataField{name: name, len: len(values), keys: maps.Keys(values), digest: func(key string) (checksum.Digest, bool) {
		v, ok := values[key]
		if !ok {
			return checksum.Digest{}, false
		}
		return digest(v), true
	}}
}

func newSourceState(o metav1.Object) *SourceState {
	// No UID: nothing decides by a source's (a source deleted and made
	// again with the same data is the same data), and it is 48 bytes a
	// source.
	return &SourceState{Meta: objmeta.Meta{
		Name:            o.GetName(),
		Namespace:       objmeta.Intern(o.GetNamespace()),
		ResourceVersion: o.GetResourceVersion(),
	}}
}

// keptAnnotations returns those of annotations that keep names; nil when
// there are none.
func keptAnnotations(annotations map[string]string, keep []string) (kept map[string]string) {
	for _, k := range keep {
		if v, ok := annotations[k]; ok {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[k] = v
		}
	}
	return kept
}

// Change identifies the source's current data as a whole: the ID of a change
// in wave decisions, in holds, and in the release annotation (16 hex
// characters). It is keyed like checksums (checksum.Hasher): it is written on
// workloads and Events, and must not let anyone test guesses of the data
// against it. Empty without a key.
func (c *SourceState) Change(h checksum.Hasher) string {
	_, sum, _ := strings.Cut(c.Checksum(h, nil), ":")
	return sum
}

// set records a key's digest and the field holding it. A key in two fields
// (which the API server refuses for ConfigMaps) keeps the later field's,
// in the order of dataFields, whichever way the object was fetched.
func (c *SourceState) set(b *checksum.DigestsBuilder, key, field string, d checksum.Digest) {
	b.Set(key, d)
	if field == defaultField {
		delete(c.Fields, key)
		return
	}
	if c.Fields == nil {
		c.Fields = map[string]string{}
	}
	c.Fields[key] = field
}

// bytesOf is a read-only view of a string's bytes, for hashing without a copy.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
