// Package catalog holds what the controller knows about sources and workloads:
// reduced objects kept by the informers' caches, and the lookups decisions need.
// Objects are reduced when they enter the cache, so memory follows the number of
// objects, not the bytes of source data they carry.
package catalog

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"iter"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// Digest identifies one value of a source key without holding the value.
type Digest [16]byte

// SourceID names a source object the way the applied-checksums annotation does:
// "configmap/NS/NAME".
type SourceID struct {
	Kind      string
	Namespace string
	Name      string
}

func (id SourceID) String() string { return id.Kind + "/" + id.Namespace + "/" + id.Name }

// SourceState is what the cache keeps of a source object: identity and one
// digest per key, never the data itself. A source with more keys than
// MaxDigestKeys (or longer key names than MaxDigestKeyBytes) keeps instead
// the checksums of its whole data (Whole), so its cost does not grow with
// its keys; the digests of the keys a workload reads of it are then read on
// demand (KeyReader.Read) into a copy that holds only those.
type SourceState struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	// Digests digest each key's value alone (the value's text, as JSON
	// carries it). For a large source (Whole set), only the keys of covered
	// that exist, or nil.
	Digests Digests `json:"digests"`
	// Fields names the data field of each key that is not in "data", e.g.
	// "binaryData": the same bytes are another file there. Nil when every key
	// is in "data", as in most ConfigMaps and every Secret, so the common case
	// costs no memory.
	Fields map[string]string `json:"fields,omitempty"`
	// Whole is set for a large source: what reads of the whole object
	// compare, computed when the object entered the cache.
	Whole *WholeSums `json:"whole,omitempty"`
	// covered lists, sorted, the keys whose digests a large source's state
	// holds (present in Digests, or absent from the data): those a keyed
	// read may ask for (Covers).
	covered []string
}

// DeepCopyObject is required of cached objects; digests are never mutated in
// place, but the mutation detector of client-go may compare copies.
func (c *SourceState) DeepCopyObject() runtime.Object {
	out := &SourceState{TypeMeta: c.TypeMeta}
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	// nil stays nil: the mutation detector compares with reflect.DeepEqual.
	if c.Digests != nil {
		out.Digests = slices.Clone(c.Digests)
	}
	if c.Fields != nil {
		out.Fields = make(map[string]string, len(c.Fields))
		for k, v := range c.Fields {
			out.Fields[k] = v
		}
	}
	if c.Whole != nil {
		whole := *c.Whole
		out.Whole = &whole
	}
	if c.covered != nil {
		out.covered = append([]string{}, c.covered...)
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
	if len(c.Digests) != len(other.Digests) || len(c.Fields) != len(other.Fields) {
		return false
	}
	// Both sorted, each key once.
	for i, e := range c.Digests {
		if other.Digests[i] != e {
			return false
		}
	}
	for k, f := range c.Fields {
		if of, ok := other.Fields[k]; !ok || of != f {
			return false
		}
	}
	return true
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

// ChecksumVersion is the version of the checksums Checksum returns. Recorded
// checksums of an older version are still compared (Matches), so that a new
// version re-records workloads once, without restarting them.
//
//	version 1: 16 hex characters, digests of the values alone (xing's
//	           format, and this controller's before issue 8)
//	version 2: "v2:" and 16 hex characters, each key's digest also covering
//	           the data field that holds it
//	version 3: "v3.KEYID:" and 16 hex characters, version 2's input
//	           authenticated with HMAC-SHA-256 under a key only the controller
//	           holds (Hasher), so the annotation cannot be checked against
//	           guesses of the data by anyone who reads the workload
const ChecksumVersion = 3

// Checksum is the current version's digest of exactly the data a reference
// reads: the given keys (present or absent), or every key when keys is nil.
// Without a key (an unkeyed Hasher) it is empty: nothing can be recorded.
//
// A large source's state answers every read of the whole object, and keyed
// reads of the keys it covers (Covers); for any other read it returns "",
// like a state without a key: callers read the keys first (KeyReader).
func (c *SourceState) Checksum(h Hasher, keys []string) string {
	if h.key == nil {
		return ""
	}
	if c.Whole != nil && keys == nil {
		if c.Whole.KeyID != h.id {
			return ""
		}
		return "v3." + h.id + ":" + hex.EncodeToString(c.Whole.V3[:])
	}
	if !c.Covers(keys) {
		return ""
	}
	return "v3." + h.id + ":" + c.checksum(keys, c.inField, func() hash.Hash { return hmac.New(sha256.New, h.key) })
}

// ChecksumOf computes an unkeyed checksum of an earlier format version, for
// comparing what earlier releases recorded; ok is false for other versions.
func (c *SourceState) ChecksumOf(version int, keys []string) (sum string, ok bool) {
	if c.Whole != nil && keys == nil {
		switch version {
		case 1:
			return hex.EncodeToString(c.Whole.V1[:]), true
		case 2:
			return "v2:" + hex.EncodeToString(c.Whole.V2[:]), true
		}
		return "", false
	}
	if !c.Covers(keys) {
		return "", false
	}
	switch version {
	case 1:
		return c.checksum(keys, func(_ string, d Digest) Digest { return d }, sha256.New), true
	case 2:
		return "v2:" + c.checksum(keys, c.inField, sha256.New), true
	}
	return "", false
}

// RecordedVersion returns the format version of a recorded checksum, or 0
// when it is not a checksum (absent, pending, or anything unknown).
func RecordedVersion(recorded string) int {
	v, _, _ := parseRecorded(recorded)
	return v
}

// parseRecorded splits a recorded checksum into its version, key ID
// (version 3) and sum; version 0 when it is not a checksum.
func parseRecorded(recorded string) (version int, keyID, sum string) {
	if isHex16(recorded) {
		return 1, "", recorded
	}
	rest, ok := strings.CutPrefix(recorded, "v")
	if !ok {
		return 0, "", ""
	}
	head, sum, ok := strings.Cut(rest, ":")
	if !ok || !isHex16(sum) {
		return 0, "", ""
	}
	n, keyID, _ := strings.Cut(head, ".")
	v, err := strconv.Atoi(n)
	if err != nil || v < 2 || strconv.Itoa(v) != n || (v == 3) != (keyID != "") {
		return 0, "", ""
	}
	return v, keyID, sum
}

// Matches reports whether a recorded checksum, of any version this build
// knows, describes the data the keys read now. A recorded checksum of an
// unknown version, or keyed with another key, never matches: it cannot be
// compared (Hasher.Rebaseline tells the second case apart).
func (c *SourceState) Matches(h Hasher, recorded string, keys []string) bool {
	switch v, keyID, _ := parseRecorded(recorded); v {
	case 3:
		return keyID == h.id && h.key != nil && c.Checksum(h, keys) == recorded
	case 0:
		return false
	default:
		now, ok := c.ChecksumOf(v, keys)
		return ok && now == recorded
	}
}

func isHex16(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// checksum hashes the keys, with the per-key digests that keyDigest gives,
// into the hash newHash makes: sixteen hex characters.
func (c *SourceState) checksum(keys []string, keyDigest func(key string, d Digest) Digest, newHash func() hash.Hash) string {
	return hex.EncodeToString(c.sum(keys, keyDigest, newHash)[:8])
}

// sum is checksum's hash, whole. wholeSums computes the same for a large
// source, and must stay byte for byte what this writes.
func (c *SourceState) sum(keys []string, keyDigest func(key string, d Digest) Digest, newHash func() hash.Hash) []byte {
	h := newHash()
	var lenBuf [8]byte
	writeKey := func(k string) {
		binary.BigEndian.PutUint64(lenBuf[:], uint64(len(k)))
		h.Write(lenBuf[:])
		h.Write(bytesOf(k))
	}
	if keys == nil {
		h.Write([]byte{'w'})
		for _, e := range c.Digests {
			d := keyDigest(e.Key, e.Digest)
			writeKey(e.Key)
			h.Write(d[:])
		}
	} else {
		h.Write([]byte{'k'})
		for _, k := range keys {
			writeKey(k)
			if d, ok := c.Digests.Get(k); ok {
				d = keyDigest(k, d)
				h.Write([]byte{1})
				h.Write(d[:])
			} else {
				// An absent key is part of what the pod sees (an empty env var,
				// a missing file), and its later appearance is a change.
				h.Write([]byte{0})
			}
		}
	}
	return h.Sum(nil)
}

// inField is the version-2 digest of key.
func (c *SourceState) inField(key string, d Digest) Digest { return inField(c.field(key), d) }

// inField is a key's version-2 digest: the data field and the value's digest,
// length-prefixed, so that no two (field, value) pairs share an encoding.
// Derived from the value digest rather than from the value, so the value is
// hashed once however many versions are kept comparable.
//
// The input is laid out in a buffer on the stack and hashed at once: a large
// source computes this for each of its keys when it enters the cache.
func inField(field string, value Digest) Digest {
	var stack [64]byte
	buf := stack[:0]
	if n := 8 + len(field) + 8 + len(value); n > len(stack) {
		buf = make([]byte, 0, n)
	}
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(field)))
	buf = append(buf, field...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(value)))
	buf = append(buf, value[:]...)
	sum := sha256.Sum256(buf)
	var d Digest
	copy(d[:], sum[:])
	return d
}

// ReduceSource returns an informer transform that replaces a source object by
// its SourceState, with one digest per key however many keys it has: what a
// one-off reader (explain, tests) wants. The controller's caches reduce
// through SourceReducer, which bounds what a source with many keys costs.
// The annotations named by keep are kept, the others dropped.
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
	Sums Hasher
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
			fields, meta, err := dataFieldsOf(o, r.DataFields)
			if err != nil {
				return nil, err
			}
			state := newSourceState(meta)
			state.Annotations = keptAnnotations(meta.GetAnnotations(), nil, r.Keep)
			if u, ok := meta.(*unstructured.Unstructured); ok {
				state.TypeMeta = metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()}
			}
			if r.Bounded && tooManyKeys(fields) {
				state.Whole, _, _ = wholeSums(fields, r.Sums, nil)
				return state, nil
			}
			var b digestsBuilder
			for _, f := range fields {
				for key := range f.keys {
					d, _ := f.digest(key)
					state.set(&b, key, f.name, d)
				}
			}
			state.Digests = b.done()
			return state, nil
		default:
			return obj, nil
		}
	}
}

// dataField is one data field of a decoded source object, e.g. a ConfigMap's
// "binaryData": its keys, and each key's value digest, read from the object
// in place (no copy of a value is made).
type dataField struct {
	name   string
	len    int
	keys   iter.Seq[string]
	digest func(key string) (Digest, bool)
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
			"data":       mapField("data", o.Data, digestString),
			"binaryData": mapField("binaryData", o.BinaryData, digestBase64),
		}), o, nil
	case *corev1.Secret:
		return typedFields(dataFields, map[string]dataField{
			"data":       mapField("data", o.Data, digestBase64),
			"stringData": mapField("stringData", o.StringData, digestString),
		}), o, nil
	case *unstructured.Unstructured:
		for _, name := range dataFields {
			if values, ok := o.Object[name].(map[string]interface{}); ok {
				fields = append(fields, mapField(name, values, digestValue))
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
// digested as their base64 text (digestBase64), which is what JSON carries
// for them, so both ways of fetching agree.
func mapField[V any](name string, values map[string]V, digest func(V) Digest) dataField {
	return dataField{name: name, len: len(values), keys: maps.Keys(values), digest: func(key string) (Digest, bool) {
		v, ok := values[key]
		if !ok {
			return Digest{}, false
		}
		return digest(v), true
	}}
}

func newSourceState(o metav1.Object) *SourceState {
	return &SourceState{
		ObjectMeta: metav1.ObjectMeta{
			Name:            o.GetName(),
			Namespace:       o.GetNamespace(),
			UID:             o.GetUID(),
			ResourceVersion: o.GetResourceVersion(),
		},
	}
}

// keptAnnotations adds to kept those of annotations that keep names; nil
// when there are none.
func keptAnnotations(annotations, kept map[string]string, keep []string) map[string]string {
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
// characters). It is keyed like checksums (Hasher): it is written on
// workloads and Events, and must not let anyone test guesses of the data
// against it. Empty without a key.
func (c *SourceState) Change(h Hasher) string {
	_, sum, _ := strings.Cut(c.Checksum(h, nil), ":")
	return sum
}

// set records a key's digest and the field holding it. A key in two fields
// (which the API server refuses for ConfigMaps) keeps the later field's,
// in the order of dataFields, whichever way the object was fetched.
func (c *SourceState) set(b *digestsBuilder, key, field string, d Digest) {
	b.set(key, d)
	if field == defaultField {
		delete(c.Fields, key)
		return
	}
	if c.Fields == nil {
		c.Fields = map[string]string{}
	}
	c.Fields[key] = field
}

// digestBase64 digests a byte value as its base64 text; the encoding streams
// into the hash, so no copy of the value is made.
func digestBase64(value []byte) Digest {
	h := sha256.New()
	enc := base64.NewEncoder(base64.StdEncoding, h)
	_, _ = enc.Write(value) // writes to a hash cannot fail
	_ = enc.Close()
	var d Digest
	copy(d[:], h.Sum(nil))
	return d
}

// digestString digests a string value. It hashes a view of the string, not a
// copy: values are up to 1 MiB and the hash neither keeps nor changes its
// input. Copying was a fifth transient copy of all source data during sync
// (see BENCHMARKS.md).
func digestString(v string) Digest {
	sum := sha256.Sum256(bytesOf(v))
	var d Digest
	copy(d[:], sum[:])
	return d
}

func digestValue(value interface{}) Digest {
	if v, ok := value.(string); ok {
		return digestString(v)
	}
	// Source kinds declared by configuration may hold non-string values;
	// encoding/json sorts map keys, so the encoding is stable.
	raw, _ := json.Marshal(value)
	sum := sha256.Sum256(raw)
	var d Digest
	copy(d[:], sum[:])
	return d
}

// bytesOf is a read-only view of a string's bytes, for hashing without a copy.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
