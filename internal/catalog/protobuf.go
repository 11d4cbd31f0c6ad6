package catalog

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Decoding a ConfigMap or Secret the usual way (client-go's generated
// Unmarshal) builds a map of every key, copies every key and value, and
// copies the managedFields entry the API server keeps for each key: about
// 10 MB of garbage for a 1 MB ConfigMap of 80,000 empty keys, after two
// copies of its encoding. So the source informers of these kinds decode
// their protobuf encoding here instead: the identity is read, the data is
// hashed where the encoding holds it, and nothing else is kept or copied
// (ProtobufSources). The digests are those of the typed objects (tested):
// a string value's digest is that of its bytes, a byte value's that of its
// base64 text.

// protobufPrefix starts every protobuf-encoded object: the k8s.io
// runtime.Unknown envelope follows.
var protobufPrefix = []byte("k8s\x00")

// protoKind is the protobuf encoding of a source kind client-go knows:
// k8s.io/api/core/v1/generated.proto.
type protoKind struct {
	kind, list string
	// fields are the data fields: map<string, string> or map<string, bytes>.
	fields map[string]protoField
}

type protoField struct {
	num   protowire.Number
	bytes bool // values are bytes, digested as their base64 text
}

var protoKinds = map[string]*protoKind{
	"ConfigMap": {kind: "ConfigMap", list: "ConfigMapList", fields: map[string]protoField{
		"data": {num: 2}, "binaryData": {num: 3, bytes: true}}},
	"Secret": {kind: "Secret", list: "SecretList", fields: map[string]protoField{
		"data": {num: 2, bytes: true}, "stringData": {num: 4}}},
}

// Field numbers of k8s.io/apimachinery's generated.proto.
const (
	objectMetadata  = 1 // ConfigMap, Secret and their lists: metadata
	listItems       = 2
	metaName        = 1 // ObjectMeta
	metaNamespace   = 3
	metaUID         = 5
	metaRV          = 6
	metaAnnotations = 12
	listRV          = 2 // ListMeta
	listContinue    = 3
	listRemaining   = 4
	entryKey        = 1 // map entries
	entryValue      = 2
)

var errMalformed = errors.New("malformed protobuf")

// encodedSource is a source object still in its protobuf encoding: its
// identity decoded, its data left in raw, which it does not own.
type encodedSource struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	raw  []byte
	kind *protoKind
}

// DeepCopyObject is required of runtime.Object; the encoding is shared.
func (e *encodedSource) DeepCopyObject() runtime.Object {
	out := *e
	e.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// forEachField calls fn for each field of a message, in order, with the
// field's number, wire type, and its bytes (the value of a length-delimited
// field). It fails on anything not well formed.
func forEachField(b []byte, fn func(num protowire.Number, typ protowire.Type, value []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		var value []byte
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return errMalformed
			}
			value, n = v, m
		} else if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return errMalformed
		}
		b = b[n:]
		if err := fn(num, typ, value); err != nil {
			return err
		}
	}
	return nil
}

// mapEntry returns a map entry's key and value; absent ones are empty, and
// of repeated ones the last counts, as in generated code. It allocates
// nothing: sorting a large source's entries calls it for every comparison.
func mapEntry(b []byte) (key, value []byte, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, errMalformed
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, nil, errMalformed
			}
			switch num {
			case entryKey:
				key = v
			case entryValue:
				value = v
			}
			b = b[m:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return nil, nil, errMalformed
		}
		b = b[n:]
	}
	return key, value, nil
}

// parseEnvelope reads the runtime.Unknown envelope of a protobuf-encoded
// object; ok is false for anything else (not protobuf, or encoded further).
func parseEnvelope(data []byte) (apiVersion, kind string, raw []byte, ok bool) {
	if !bytes.HasPrefix(data, protobufPrefix) {
		return "", "", nil, false
	}
	var encoded bool
	err := forEachField(data[len(protobufPrefix):], func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1: // typeMeta
			return forEachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					apiVersion = string(v)
				case num == 2 && typ == protowire.BytesType:
					kind = string(v)
				}
				return nil
			})
		case 2:
			raw = v
		case 3: // contentEncoding
			encoded = len(v) > 0
		}
		return nil
	})
	return apiVersion, kind, raw, err == nil && !encoded
}

// decodeEncodedSource reads the identity of an encoded source and checks
// that its data fields are well formed, so that reading them cannot fail.
// Of the annotations it keeps only the one that marks the end of a watch's
// initial events (which the informer reads from a bookmark): another could
// be large (kubectl's last-applied-configuration holds the whole object).
func decodeEncodedSource(raw []byte, kind *protoKind, keep []string) (*encodedSource, error) {
	e := &encodedSource{raw: raw, kind: kind}
	err := forEachField(raw, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		if num == objectMetadata {
			return decodeObjectMeta(v, &e.ObjectMeta, keep)
		}
		for _, f := range kind.fields {
			if f.num == num {
				_, _, err := mapEntry(v)
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decoding a %s: %w", kind.kind, err)
	}
	return e, nil
}

// decodeObjectMeta reads the identity of an object, the annotation that
// marks the end of a watch's initial events, and the annotations keep names.
func decodeObjectMeta(b []byte, m *metav1.ObjectMeta, keep []string) error {
	return forEachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case metaName:
			m.Name = string(v)
		case metaNamespace:
			m.Namespace = string(v)
		case metaUID:
			m.UID = types.UID(v)
		case metaRV:
			m.ResourceVersion = string(v)
		case metaAnnotations:
			key, value, err := mapEntry(v)
			if err != nil {
				return err
			}
			if k := string(key); k == metav1.InitialEventsAnnotationKey || slices.Contains(keep, k) {
				if m.Annotations == nil {
					m.Annotations = map[string]string{}
				}
				m.Annotations[k] = string(value)
			}
		}
		return nil
	})
}

// encodedField is one data field of an encoded source, in the order of
// dataFields.
type encodedField struct {
	name string
	protoField
}

func (e *encodedSource) dataFields(dataFields []string) []encodedField {
	var out []encodedField
	for _, name := range dataFields {
		if f, ok := e.kind.fields[name]; ok {
			out = append(out, encodedField{name, f})
		}
	}
	return out
}

// entries calls fn with each entry of field, in the order of the encoding:
// where its encoding starts in e.raw, how long it is, its key and value.
func (e *encodedSource) entries(field protowire.Number, fn func(at, size int, key, value []byte)) {
	for at := 0; at < len(e.raw); {
		num, typ, n := protowire.ConsumeTag(e.raw[at:])
		if n < 0 {
			return // checked by decodeEncodedSource
		}
		at += n
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, e.raw[at:]); n < 0 {
				return
			}
			at += n
			continue
		}
		size, n := protowire.ConsumeVarint(e.raw[at:])
		if n < 0 || size > uint64(len(e.raw)-at-n) {
			return
		}
		at += n
		if num == field {
			entry := e.raw[at : at+int(size)]
			key, value, _ := mapEntry(entry)
			fn(at, int(size), key, value)
		}
		at += int(size)
	}
}

func (f encodedField) digest(value []byte) Digest {
	if f.bytes {
		return digestBase64(value)
	}
	return digestString(unsafeString(value))
}

// reduceEncoded reduces an encoded source as Transform reduces the decoded
// object, without decoding its data.
func (r SourceReducer) reduceEncoded(e *encodedSource) *SourceState {
	state := newSourceState(e)
	if e.Annotations != nil { // a bookmark's
		state.Annotations = e.Annotations
	}
	fields := e.dataFields(r.DataFields)
	if r.Bounded && e.tooManyKeys(fields) {
		state.Whole, _, _ = e.wholeSums(fields, r.Sums, nil)
		return state
	}
	var b digestsBuilder
	for _, f := range fields {
		e.entries(f.num, func(_, _ int, key, value []byte) {
			state.set(&b, string(key), f.name, f.digest(value))
		})
	}
	state.Digests = b.done()
	return state
}

// tooManyKeys is tooManyKeys for an encoded source.
func (e *encodedSource) tooManyKeys(fields []encodedField) bool {
	n, nameBytes := 0, 0
	for _, f := range fields {
		e.entries(f.num, func(_, _ int, key, _ []byte) {
			n++
			nameBytes += len(key)
		})
	}
	return n > MaxDigestKeys || nameBytes > MaxDigestKeyBytes
}

// encodedEntry locates one map entry in the encoding, and its data field
// in the order of dataFields: twelve bytes an entry.
type encodedEntry struct {
	at, size uint32
	field    uint8
}

func (e *encodedSource) entry(en encodedEntry) (key, value []byte) {
	key, value, _ = mapEntry(e.raw[en.at : en.at+en.size])
	return key, value
}

// wholeSums is wholeSums for an encoded source. It sorts where the entries
// are rather than copies of their keys, and hashes each value where the
// encoding holds it. Of a key held twice (two fields, or one repeated
// entry), the later field in the order of dataFields counts, and within a
// field the later entry, as decoding into a map and SourceState.set keep.
func (e *encodedSource) wholeSums(fields []encodedField, sums Hasher, wanted []string) (*WholeSums, map[string]Digest, map[string]string) {
	n := 0
	for _, f := range fields {
		e.entries(f.num, func(_, _ int, _, _ []byte) { n++ })
	}
	list := make([]encodedEntry, 0, n)
	for i, f := range fields {
		e.entries(f.num, func(at, size int, _, _ []byte) {
			list = append(list, encodedEntry{at: uint32(at), size: uint32(size), field: uint8(i)})
		})
	}
	slices.SortFunc(list, func(a, b encodedEntry) int {
		ka, _ := e.entry(a)
		kb, _ := e.entry(b)
		if c := bytes.Compare(ka, kb); c != 0 {
			return c
		}
		if c := cmp.Compare(a.field, b.field); c != 0 {
			return c
		}
		return cmp.Compare(a.at, b.at)
	})
	w := newWholeHasher(sums, wanted)
	for i, en := range list {
		key, value := e.entry(en)
		if i+1 < len(list) {
			if next, _ := e.entry(list[i+1]); bytes.Equal(key, next) {
				continue // held again, later
			}
		}
		f := fields[en.field]
		w.add(key, f.name, f.digest(value))
	}
	return w.finish()
}

// unsafeString is a read-only view of b as a string, for hashing.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

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

// decodeEncodedList reads a list's metadata and calls each with its items.
func decodeEncodedList(raw []byte, kind *protoKind, keep []string, each func(*encodedSource)) (metav1.ListMeta, error) {
	var meta metav1.ListMeta
	err := forEachField(raw, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case objectMetadata:
			return forEachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				switch {
				case num == listRV && typ == protowire.BytesType:
					meta.ResourceVersion = string(v)
				case num == listContinue && typ == protowire.BytesType:
					meta.Continue = string(v)
				}
				return nil
			})
		case listItems:
			item, err := decodeEncodedSource(v, kind, keep)
			if err != nil {
				return err
			}
			each(item)
		}
		return nil
	})
	if err != nil {
		return meta, fmt.Errorf("decoding a %s: %w", kind.list, err)
	}
	// remainingItemCount is a varint, which forEachField hands over as no
	// bytes: read it apart.
	meta.RemainingItemCount = remainingItemCount(raw)
	return meta, nil
}

func remainingItemCount(list []byte) *int64 {
	var count *int64
	_ = forEachField(list, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != objectMetadata || typ != protowire.BytesType {
			return nil
		}
		for b := v; len(b) > 0; {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				return nil
			}
			b = b[n:]
			if num == listRemaining && typ == protowire.VarintType {
				x, m := protowire.ConsumeVarint(b)
				if m < 0 {
					return nil
				}
				c := int64(x)
				count = &c
			}
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil
			}
			b = b[n:]
		}
		return nil
	})
	return count
}

// ProtobufSources wraps base, the codecs of a REST client of one source kind
// client-go knows (v1 ConfigMap or Secret; ok is false for another), so
// that its objects decode into SourceStates and its lists into
// SourceStateLists, reduced by r. In protobuf, what the API server sends,
// that is done without decoding their data into maps or copying it, and the
// frames of a watch are read without copying the objects they carry either:
// client-go decodes each event's object before it reads the next frame into
// the same buffer, and a SourceState keeps nothing of the encoding. An
// answer in JSON is decoded as base does and then reduced. Anything else (a
// Status) decodes as base does.
func (r SourceReducer) ProtobufSources(gvk schema.GroupVersionKind, base runtime.NegotiatedSerializer) (runtime.NegotiatedSerializer, bool) {
	k, ok := protoKinds[gvk.Kind]
	if !ok || gvk.Group != "" || gvk.Version != "v1" {
		return nil, false
	}
	return protobufSources{base: base, r: r, kind: k}, true
}

type protobufSources struct {
	base runtime.NegotiatedSerializer
	r    SourceReducer
	kind *protoKind
}

func (n protobufSources) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := slices.Clone(n.base.SupportedMediaTypes())
	for i, info := range infos {
		infos[i].Serializer = sourceDecoder{Serializer: info.Serializer, n: n}
		if info.MediaType == runtime.ContentTypeProtobuf && info.StreamSerializer != nil {
			stream := *info.StreamSerializer
			stream.Serializer = watchEventDecoder{Serializer: stream.Serializer}
			infos[i].StreamSerializer = &stream
		}
	}
	return infos
}

func (n protobufSources) EncoderForVersion(e runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return n.base.EncoderForVersion(e, gv)
}

func (n protobufSources) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return n.base.DecoderToVersion(d, gv)
}

// sourceDecoder decodes sources of its kind, and their lists, reduced.
type sourceDecoder struct {
	runtime.Serializer
	n protobufSources
}

func (d sourceDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into != nil {
		return d.Serializer.Decode(data, defaults, into)
	}
	if apiVersion, kind, raw, ok := parseEnvelope(data); ok && apiVersion == "v1" {
		gvk := schema.GroupVersionKind{Version: "v1", Kind: kind}
		switch kind {
		case d.n.kind.kind:
			e, err := decodeEncodedSource(raw, d.n.kind, d.n.r.Keep)
			if err != nil {
				return nil, &gvk, err
			}
			return d.n.r.reduceEncoded(e), &gvk, nil
		case d.n.kind.list:
			list := &SourceStateList{}
			meta, err := decodeEncodedList(raw, d.n.kind, d.n.r.Keep, func(e *encodedSource) {
				list.Items = append(list.Items, *d.n.r.reduceEncoded(e))
			})
			if err != nil {
				return nil, &gvk, err
			}
			list.ListMeta = meta
			return list, &gvk, nil
		}
	}
	obj, gvk, err := d.Serializer.Decode(data, defaults, into)
	if err != nil {
		return obj, gvk, err
	}
	if gvk == nil || gvk.Group != "" || (gvk.Kind != d.n.kind.kind && gvk.Kind != d.n.kind.list) {
		return obj, gvk, nil
	}
	reduced, err := d.n.reduceDecoded(obj)
	return reduced, gvk, err
}

// reduceDecoded reduces an object of the kind, or a list of them, decoded
// the usual way; anything else is returned as it is.
func (n protobufSources) reduceDecoded(obj runtime.Object) (runtime.Object, error) {
	reduce := n.r.Transform()
	var items []runtime.Object
	var meta metav1.ListMeta
	switch o := obj.(type) {
	case *corev1.ConfigMap, *corev1.Secret:
		out, err := reduce(o)
		if err != nil {
			return nil, err
		}
		return out.(*SourceState), nil
	case *corev1.ConfigMapList:
		meta = o.ListMeta
		for i := range o.Items {
			items = append(items, &o.Items[i])
		}
	case *corev1.SecretList:
		meta = o.ListMeta
		for i := range o.Items {
			items = append(items, &o.Items[i])
		}
	default:
		return obj, nil
	}
	list := &SourceStateList{ListMeta: meta, Items: make([]SourceState, 0, len(items))}
	for _, item := range items {
		out, err := reduce(item)
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, *out.(*SourceState))
	}
	return list, nil
}

// watchEventDecoder reads the frames of a protobuf watch into
// metav1.WatchEvents whose object is not copied out of the frame.
type watchEventDecoder struct{ runtime.Serializer }

func (d watchEventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	event, ok := into.(*metav1.WatchEvent)
	if !ok {
		return d.Serializer.Decode(data, defaults, into)
	}
	*event = metav1.WatchEvent{}
	err := forEachField(data, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1: // type
			event.Type = string(v)
		case 2: // object: a RawExtension, whose field 1 is raw
			return forEachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				if num == 1 && typ == protowire.BytesType {
					event.Object.Raw = v
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("decoding a watch event: %w", err)
	}
	gvk := metav1.SchemeGroupVersion.WithKind("WatchEvent")
	return event, &gvk, nil
}

// DecodeProtobufList decodes the protobuf response of a LIST of ConfigMaps
// or Secrets into objects whose data stays where data holds it (they keep
// it), for a KeyReader to reduce: the least memory a read of a large
// source can take. ok is false when data is not such a list.
func DecodeProtobufList(data []byte) (items []runtime.Object, ok bool, err error) {
	apiVersion, kind, raw, ok := parseEnvelope(data)
	if !ok || apiVersion != "v1" {
		return nil, false, nil
	}
	for _, k := range protoKinds {
		if k.list == kind {
			_, err := decodeEncodedList(raw, k, nil, func(e *encodedSource) { items = append(items, e) })
			return items, true, err
		}
	}
	return nil, false, nil
}
