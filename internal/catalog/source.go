// Package catalog holds what the controller knows about sources and workloads:
// reduced objects kept by the informers' caches, and the lookups decisions need.
// Objects are reduced when they enter the cache, so memory follows the number of
// objects, not the bytes of source data they carry.
package catalog

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
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
// digest per key, never the data itself.
type SourceState struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Digests           map[string]Digest `json:"digests"`
}

// DeepCopyObject is required of cached objects; digests are never mutated in
// place, but the mutation detector of client-go may compare copies.
func (c *SourceState) DeepCopyObject() runtime.Object {
	out := &SourceState{TypeMeta: c.TypeMeta}
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Digests = make(map[string]Digest, len(c.Digests))
	for k, v := range c.Digests {
		out.Digests[k] = v
	}
	return out
}

// SameData reports whether two states carry identical data; metadata-only
// changes (labels, annotations) compare equal.
func (c *SourceState) SameData(other *SourceState) bool {
	if len(c.Digests) != len(other.Digests) {
		return false
	}
	for k, d := range c.Digests {
		if od, ok := other.Digests[k]; !ok || od != d {
			return false
		}
	}
	return true
}

// Checksum is the digest of exactly the data a reference reads: the given keys
// (present or absent), or every key when keys is nil. Sixteen hex characters,
// the annotation format of xing's controller.
func (c *SourceState) Checksum(keys []string) string {
	h := sha256.New()
	var lenBuf [8]byte
	writeKey := func(k string) {
		binary.BigEndian.PutUint64(lenBuf[:], uint64(len(k)))
		h.Write(lenBuf[:])
		h.Write([]byte(k))
	}
	if keys == nil {
		h.Write([]byte{'w'})
		for _, k := range sortedKeys(c.Digests) {
			d := c.Digests[k]
			writeKey(k)
			h.Write(d[:])
		}
	} else {
		h.Write([]byte{'k'})
		for _, k := range keys {
			writeKey(k)
			if d, ok := c.Digests[k]; ok {
				h.Write([]byte{1})
				h.Write(d[:])
			} else {
				// An absent key is part of what the pod sees (an empty env var,
				// a missing file), and its later appearance is a change.
				h.Write([]byte{0})
			}
		}
	}
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:8])
}

func sortedKeys(m map[string]Digest) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ReduceSource returns an informer transform that replaces a source object by
// its SourceState. dataFields are the top-level maps whose entries are hashed.
// Objects come as unstructured (dynamic client, JSON) or typed (protobuf
// client, for kinds client-go knows); both give the same digests, because
// applied checksums outlive any one way of fetching. Tombstones and already
// reduced objects pass through: client-go may hand an object over twice.
func ReduceSource(dataFields []string) cache.TransformFunc {
	return func(obj interface{}) (interface{}, error) {
		switch o := obj.(type) {
		case *unstructured.Unstructured:
			return reduceUnstructuredSource(o, dataFields), nil
		case *corev1.ConfigMap:
			state := newSourceState(o)
			for _, field := range dataFields {
				switch field {
				case "data":
					digestStrings(state, o.Data)
				case "binaryData":
					digestBytes(state, o.BinaryData)
				}
			}
			return state, nil
		case *corev1.Secret:
			state := newSourceState(o)
			for _, field := range dataFields {
				switch field {
				case "data":
					digestBytes(state, o.Data)
				case "stringData":
					digestStrings(state, o.StringData)
				}
			}
			return state, nil
		case *SourceState:
			return obj, nil
		case runtime.Object:
			// Another typed kind: convert, which is what the JSON path sees.
			content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			if err != nil {
				return nil, fmt.Errorf("reducing %T: %w", o, err)
			}
			return reduceUnstructuredSource(&unstructured.Unstructured{Object: content}, dataFields), nil
		default:
			return obj, nil
		}
	}
}

func newSourceState(o metav1.Object) *SourceState {
	return &SourceState{
		ObjectMeta: metav1.ObjectMeta{
			Name:            o.GetName(),
			Namespace:       o.GetNamespace(),
			UID:             o.GetUID(),
			ResourceVersion: o.GetResourceVersion(),
		},
		Digests: map[string]Digest{},
	}
}

func reduceUnstructuredSource(u *unstructured.Unstructured, dataFields []string) *SourceState {
	state := newSourceState(u)
	state.TypeMeta = metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()}
	for _, field := range dataFields {
		values, ok := u.Object[field].(map[string]interface{})
		if !ok {
			continue
		}
		for key, value := range values {
			state.Digests[key] = digestValue(value)
		}
	}
	return state
}

func digestStrings(state *SourceState, values map[string]string) {
	for key, value := range values {
		state.Digests[key] = digestValue(value)
	}
}

// digestBytes hashes byte values as their base64 text, which is what JSON
// carries for them, so both ways of fetching agree; the encoding streams into
// the hash, so no copy of the value is made.
func digestBytes(state *SourceState, values map[string][]byte) {
	for key, value := range values {
		h := sha256.New()
		enc := base64.NewEncoder(base64.StdEncoding, h)
		_, _ = enc.Write(value) // writes to a hash cannot fail
		_ = enc.Close()
		var d Digest
		copy(d[:], h.Sum(nil))
		state.Digests[key] = d
	}
}

func digestValue(value interface{}) Digest {
	var raw []byte
	switch v := value.(type) {
	case string:
		// A view, not a copy: values are up to 1 MiB and the hash neither
		// keeps nor changes its input. Copying was a fifth transient copy of
		// all source data during sync (see BENCHMARKS.md).
		raw = unsafe.Slice(unsafe.StringData(v), len(v))
	default:
		// Source kinds declared by configuration may hold non-string values;
		// encoding/json sorts map keys, so the encoding is stable.
		raw, _ = json.Marshal(v)
	}
	sum := sha256.Sum256(raw)
	var d Digest
	copy(d[:], sum[:])
	return d
}
