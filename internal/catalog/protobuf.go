package catalog

import (
	"bytes"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/sourcecodec"
)

// ConfigMaps and Secrets arrive in protobuf, which internal/sourcecodec
// reads at the wire level; this file reduces what it reads to the
// SourceStates the caches keep, as Transform reduces the decoded objects.
// The digests are those of the typed objects (tested): a string value's
// digest is that of its bytes, a byte value's that of its base64 text.

// SourceStateList is what a list of ConfigMaps or Secrets decodes to
// through ProtobufSources.
type SourceStateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []SourceState `json:"items"`
}

// DeepCopyObject is required of runtime.Object.
func (l *SourceStateList) DeepCopyObject() runtime.Object {
	out := &SourceStateList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]SourceState, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopyObject().(*SourceState)
		}
	}
	return out
}

// ProtobufSources wraps base, the codecs of a REST client of one source kind
// client-go knows (v1 ConfigMap or Secret; ok is false for another), so
// that its objects decode into SourceStates and its lists into
// SourceStateLists, reduced by r (sourcecodec.Sources). In protobuf that is
// done without decoding their data into maps or copying it; an answer in
// JSON is decoded as base does and then reduced.
func (r SourceReducer) ProtobufSources(gvk schema.GroupVersionKind, base runtime.NegotiatedSerializer) (runtime.NegotiatedSerializer, bool) {
	return sourcecodec.Sources(gvk, base, r.Keep, codecReducer{r})
}

// codecReducer is a SourceReducer as sourcecodec.Sources takes it.
type codecReducer struct{ r SourceReducer }

func (c codecReducer) Encoded(e *sourcecodec.Source) runtime.Object { return c.r.reduceEncoded(e) }

func (c codecReducer) List(meta metav1.ListMeta, items []runtime.Object) runtime.Object {
	list := &SourceStateList{ListMeta: meta}
	for _, item := range items {
		list.Items = append(list.Items, *item.(*SourceState))
	}
	return list
}

// Decoded reduces an object of the kind, or a list of them, decoded the
// usual way; anything else is returned as it is.
func (c codecReducer) Decoded(obj runtime.Object) (runtime.Object, error) {
	switch o := obj.(type) {
	case *corev1.ConfigMap, *corev1.Secret:
		state, err := c.r.Reduce(o)
		if err != nil {
			return nil, err
		}
		return state, nil
	case *corev1.ConfigMapList:
		return reduceList(c.r, o.ListMeta, o.Items)
	case *corev1.SecretList:
		return reduceList(c.r, o.ListMeta, o.Items)
	}
	return obj, nil
}

// reduceList reduces the items of a list of ConfigMaps or Secrets, decoded
// the usual way.
func reduceList[T any, P interface {
	*T
	runtime.Object
}](r SourceReducer, meta metav1.ListMeta, items []T) (runtime.Object, error) {
	list := &SourceStateList{ListMeta: meta, Items: make([]SourceState, 0, len(items))}
	for i := range items {
		state, err := r.Reduce(P(&items[i]))
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, *state)
	}
	return list, nil
}

// reduceEncoded reduces an encoded source as Transform reduces the decoded
// object, without decoding its data.
func (r SourceReducer) reduceEncoded(e *sourcecodec.Source) *SourceState {
	state := newSourceState(e)
	if e.Annotations != nil { // a bookmark's, or those r keeps
		state.Annotations = e.Annotations
	}
	fields := e.Fields(r.DataFields)
	if r.Bounded && encodedTooManyKeys(e, fields) {
		state.Whole, _, _ = encodedWholeSums(e, fields, r.Sums, nil)
		return state
	}
	var b checksum.DigestsBuilder
	for _, f := range fields {
		e.Entries(f, func(key, value []byte) {
			state.set(&b, string(key), f.Name, encodedDigest(f, value))
		})
	}
	state.Digests = b.Done()
	return state
}

// encodedDigest digests a value of an encoded source as the typed object's
// is digested.
func encodedDigest(f sourcecodec.Field, value []byte) checksum.Digest {
	if f.Bytes {
		return checksum.DigestBase64(value)
	}
	return checksum.DigestString(unsafeString(value))
}

// encodedTooManyKeys is tooManyKeys for an encoded source.
func encodedTooManyKeys(e *sourcecodec.Source, fields []sourcecodec.Field) bool {
	n, nameBytes := 0, 0
	for _, f := range fields {
		e.Entries(f, func(key, _ []byte) {
			n++
			nameBytes += len(key)
		})
	}
	return n > MaxDigestKeys || nameBytes > MaxDigestKeyBytes
}

// encodedWholeSums is wholeSums for an encoded source: each value is hashed
// where the encoding holds it, and its keys are sorted where they are
// (sourcecodec.Source.Sorted), not copied.
func encodedWholeSums(e *sourcecodec.Source, fields []sourcecodec.Field, sums checksum.Hasher, wanted []string) (*checksum.WholeSums, map[string]checksum.Digest, map[string]string) {
	w := newWholeReader(sums, wanted)
	if f, ok := soleSortedField(e, fields); ok {
		e.Entries(f, func(key, value []byte) {
			w.add(key, f.Name, encodedDigest(f, value))
		})
		return w.finish()
	}
	e.Sorted(fields, func(key, value []byte, f sourcecodec.Field) {
		w.add(key, f.Name, encodedDigest(f, value))
	})
	return w.finish()
}

// soleSortedField returns the one field of fields that holds entries when
// its keys are in strictly increasing order, as the API server encodes a
// map (sorted, each key once): then the encoding's order is the checksums'
// and nothing needs sorting. Sorted's index of the entries is twelve bytes
// each, about 1 MB for a ConfigMap of 80,000 empty keys, and ten of them
// listed at start were 9.4 MB of the 14 MB that lifted the peak RSS by
// 8.5 MiB (BENCHMARKS.md, "The key bomb on a small cluster").
func soleSortedField(e *sourcecodec.Source, fields []sourcecodec.Field) (sourcecodec.Field, bool) {
	var sole sourcecodec.Field
	held := 0
	for _, f := range fields {
		n := 0
		e.Entries(f, func(_, _ []byte) { n++ })
		if n > 0 {
			sole, held = f, held+1
		}
	}
	if held != 1 {
		return sole, false
	}
	sorted := true
	var prev []byte
	first := true
	e.Entries(sole, func(key, _ []byte) {
		if !first && bytes.Compare(prev, key) >= 0 {
			sorted = false
		}
		prev, first = key, false
	})
	return sole, sorted
}

// unsafeString is a read-only view of b as a string, for hashing.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// CoreProtobuf is rc set up for a REST client of core/v1 that asks for
// protobuf (answers in JSON still accepted), with the codecs of client-go's
// scheme: the source informers of core/v1 kinds use it, the keyed reads of
// large sources (restart.APIFetch) and status's lists of sources, so that
// all read sources as the reducing serializer (ProtobufSources) expects.
func CoreProtobuf(rc *rest.Config) *rest.Config {
	return Protobuf(rc, corev1.SchemeGroupVersion)
}

// Protobuf is a copy of rc for a REST client of one built-in group-version
// that asks for protobuf and falls back to JSON.
func Protobuf(rc *rest.Config, gv schema.GroupVersion) *rest.Config {
	cfg := rest.CopyConfig(rc)
	cfg.GroupVersion, cfg.APIPath = &gv, "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return cfg
}
