// Package sourcecodec reads the protobuf encoding of ConfigMaps and Secrets
// at the wire level, for the source caches.
//
// Decoding a ConfigMap or Secret the usual way (client-go's generated
// Unmarshal) builds a map of every key, copies every key and value, and
// copies the managedFields entry the API server keeps for each key: about
// 10 MB of garbage for a 1 MB ConfigMap of 80,000 empty keys, after two
// copies of its encoding. So the source informers of these kinds decode
// their protobuf encoding here instead: the identity is read, and the data
// is handed to a Reducer where the encoding holds it, never copied (Sources).
// What a source is reduced to, and how its values are digested, is the
// Reducer's business (internal/catalog); this package knows only the wire
// format.
package sourcecodec

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// protobufPrefix starts every protobuf-encoded object: the k8s.io
// runtime.Unknown envelope follows.
var protobufPrefix = []byte("k8s\x00")

// protoKind is the protobuf encoding of a source kind client-go knows:
// k8s.io/api/core/v1/generated.proto.
type protoKind struct {
	kind, list string
	// fields are the data fields: map<string, string> or map<string, bytes>.
	fields []Field
}

var protoKinds = map[string]*protoKind{
	"ConfigMap": {kind: "ConfigMap", list: "ConfigMapList", fields: []Field{
		{Name: "data", num: 2}, {Name: "binaryData", num: 3, Bytes: true}}},
	"Secret": {kind: "Secret", list: "SecretList", fields: []Field{
		{Name: "data", num: 2, Bytes: true}, {Name: "stringData", num: 4}}},
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

// Source is a source object still in its protobuf encoding: its identity
// decoded, its data left in raw, which it does not own. Its data is read
// with Fields, Entries and Sorted, each value where the encoding holds it.
type Source struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	raw  []byte
	kind *protoKind
}

// DeepCopyObject is required of runtime.Object; the encoding is shared.
func (e *Source) DeepCopyObject() runtime.Object {
	out := *e
	e.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// forEachField calls fn for each field of a message, in order, with the
// field's number, wire type, and its bytes: the value of a length-delimited
// field, the encoding of any other. It fails on anything not well formed.
func forEachField(b []byte, fn func(num protowire.Number, typ protowire.Type, value []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		var value []byte
		if typ == protowire.BytesType {
			value, n = protowire.ConsumeBytes(b)
		} else if n = protowire.ConsumeFieldValue(num, typ, b); n >= 0 {
			value = b[:n]
		}
		if n < 0 {
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
// apiVersion and kind are views of data: callers compare them with the
// names they know, so that no string is made per object.
func parseEnvelope(data []byte) (apiVersion, kind []byte, raw []byte, ok bool) {
	if !bytes.HasPrefix(data, protobufPrefix) {
		return nil, nil, nil, false
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
					apiVersion = v
				case num == 2 && typ == protowire.BytesType:
					kind = v
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

// decodeSource reads the identity of an encoded source and checks
// that its data fields are well formed, so that reading them cannot fail.
// Of the annotations it keeps only those keep names and the one that marks
// the end of a watch's initial events (which the informer reads from a
// bookmark): another could be large (kubectl's last-applied-configuration
// holds the whole object).
func decodeSource(raw []byte, kind *protoKind, keep []string) (*Source, error) {
	e := &Source{raw: raw, kind: kind}
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

// Field is one data field of an encoded source, e.g. a ConfigMap's
// "binaryData".
type Field struct {
	// Name is the field's name in the API, e.g. "data".
	Name string
	// Bytes is set for a map<string, bytes>, whose values JSON carries as
	// base64 text; the others are map<string, string>.
	Bytes bool
	num   protowire.Number
}

// Fields returns the data fields of the source's kind among dataFields, in
// their order.
func (e *Source) Fields(dataFields []string) []Field {
	var out []Field
	for _, name := range dataFields {
		if i := slices.IndexFunc(e.kind.fields, func(f Field) bool { return f.Name == name }); i >= 0 {
			out = append(out, e.kind.fields[i])
		}
	}
	return out
}

// Entries calls fn with each entry of field, in the order of the encoding.
// key and value are views of the encoding: fn must not keep them.
func (e *Source) Entries(field Field, fn func(key, value []byte)) {
	e.entries(field.num, func(_, _ int, key, value []byte) { fn(key, value) })
}

// entries calls fn with each entry of field, in the order of the encoding:
// where its encoding starts in e.raw, how long it is, its key and value.
func (e *Source) entries(field protowire.Number, fn func(at, size int, key, value []byte)) {
	for at := 0; at < len(e.raw); {
		num, typ, n := protowire.ConsumeTag(e.raw[at:])
		if n < 0 {
			return // checked by decodeSource
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

// encodedEntry locates one map entry in the encoding, and its data field
// in the order of dataFields: twelve bytes an entry.
type encodedEntry struct {
	at, size uint32
	field    uint8
}

func (e *Source) entry(en encodedEntry) (key, value []byte) {
	key, value, _ = mapEntry(e.raw[en.at : en.at+en.size])
	return key, value
}

// Sorted calls fn with each key of fields, sorted, once, with the value and
// field that hold it. Of a key held twice (two fields, or one repeated
// entry), the later field in the order of fields counts, and within a field
// the later entry, as decoding into a map and then merging the fields in
// their order would keep. It sorts where the entries are rather than copies
// of their keys: the only memory it takes is twelve bytes an entry. key and
// value are views of the encoding: fn must not keep them.
func (e *Source) Sorted(fields []Field, fn func(key, value []byte, field Field)) {
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
	for i, en := range list {
		key, value := e.entry(en)
		if i+1 < len(list) {
			if next, _ := e.entry(list[i+1]); bytes.Equal(key, next) {
				continue // held again, later
			}
		}
		fn(key, value, fields[en.field])
	}
}

// decodeList reads a list's metadata and calls each with its items.
func decodeList(raw []byte, kind *protoKind, keep []string, each func(*Source)) (metav1.ListMeta, error) {
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
				case num == listRemaining && typ == protowire.VarintType:
					// forEachField has read it whole: it cannot fail.
					count, _ := protowire.ConsumeVarint(v)
					c := int64(count)
					meta.RemainingItemCount = &c
				}
				return nil
			})
		case listItems:
			item, err := decodeSource(v, kind, keep)
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
	return meta, nil
}

// Reducer reduces what a source client decodes into what its cache keeps.
type Reducer interface {
	// Encoded reduces a source still in its encoding. It must keep nothing
	// of the encoding: a watch frame's buffer is reused for the next frame.
	Encoded(*Source) runtime.Object
	// List makes the list of items, each made by Encoded, and meta.
	List(meta metav1.ListMeta, items []runtime.Object) runtime.Object
	// Decoded reduces a source, or a list of them, decoded the usual way
	// (an answer in JSON); anything else it returns as it is.
	Decoded(runtime.Object) (runtime.Object, error)
}

// Sources wraps base, the codecs of a REST client of one source kind
// client-go knows (v1 ConfigMap or Secret; ok is false for another), so
// that its objects and lists decode through r. In protobuf, what the API
// server sends, that is done without decoding their data into maps or
// copying it, and the frames of a watch are read without copying the
// objects they carry either: client-go decodes each event's object before
// it reads the next frame into the same buffer. Of the annotations, only
// those keep names (and the one that marks the end of a watch's initial
// events) are decoded. An answer in JSON is decoded as base does and then
// handed to r.Decoded. Anything else (a Status) decodes as base does.
func Sources(gvk schema.GroupVersionKind, base runtime.NegotiatedSerializer, keep []string, r Reducer) (runtime.NegotiatedSerializer, bool) {
	k, ok := protoKinds[gvk.Kind]
	if !ok || gvk.Group != "" || gvk.Version != "v1" {
		return nil, false
	}
	return protobufSources{NegotiatedSerializer: base, r: r, keep: keep, kind: k}, true
}

// protobufSources encodes, and decodes anything but sources of its kind, as
// the codecs it wraps do.
type protobufSources struct {
	runtime.NegotiatedSerializer
	r    Reducer
	keep []string
	kind *protoKind
}

func (n protobufSources) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := slices.Clone(n.NegotiatedSerializer.SupportedMediaTypes())
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

// sourceDecoder decodes sources of its kind, and their lists, reduced by
// the Reducer.
type sourceDecoder struct {
	runtime.Serializer
	n protobufSources
}

func (d sourceDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into != nil {
		return d.Serializer.Decode(data, defaults, into)
	}
	if apiVersion, kind, raw, ok := parseEnvelope(data); ok && string(apiVersion) == "v1" {
		// The kind's own name, not a copy of the object's: the decoded
		// object keeps it (its TypeMeta).
		gvk := schema.GroupVersionKind{Version: "v1"}
		switch string(kind) {
		case d.n.kind.kind:
			gvk.Kind = d.n.kind.kind
			e, err := decodeSource(raw, d.n.kind, d.n.keep)
			if err != nil {
				return nil, &gvk, err
			}
			return d.n.r.Encoded(e), &gvk, nil
		case d.n.kind.list:
			gvk.Kind = d.n.kind.list
			var items []runtime.Object
			meta, err := decodeList(raw, d.n.kind, d.n.keep, func(e *Source) {
				items = append(items, d.n.r.Encoded(e))
			})
			if err != nil {
				return nil, &gvk, err
			}
			return d.n.r.List(meta, items), &gvk, nil
		}
	}
	obj, gvk, err := d.Serializer.Decode(data, defaults, into)
	if err != nil {
		return obj, gvk, err
	}
	if gvk == nil || gvk.Group != "" || (gvk.Kind != d.n.kind.kind && gvk.Kind != d.n.kind.list) {
		return obj, gvk, nil
	}
	reduced, err := d.n.r.Decoded(obj)
	return reduced, gvk, err
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

// DecodeList decodes the protobuf response of a LIST of ConfigMaps or
// Secrets into Sources whose data stays where data holds it (they keep
// it): the least memory a read of a large source can take. ok is false
// when data is not such a list.
func DecodeList(data []byte) (items []runtime.Object, ok bool, err error) {
	apiVersion, kind, raw, ok := parseEnvelope(data)
	if !ok || string(apiVersion) != "v1" {
		return nil, false, nil
	}
	for _, k := range protoKinds {
		if k.list == string(kind) {
			_, err := decodeList(raw, k, nil, func(e *Source) { items = append(items, e) })
			return items, true, err
		}
	}
	return nil, false, nil
}
