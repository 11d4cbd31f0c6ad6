package sourcecodec

import (
	"bytes"
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

var configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

// encode is what kube-apiserver sends for obj in protobuf: the k8s envelope.
func encode(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	data, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// read is what the test reducer reads of a source: everything the codec
// offers, copied out of the encoding.
type read struct {
	meta    metav1.ObjectMeta
	entries map[string][]string // field -> "key=value" in encoding order
	sorted  []string            // "field:key=value"
}

// recorder is a Reducer that reads each source fully, as a cache would.
type recorder struct {
	dataFields []string
	decoded    []runtime.Object
}

func (r *recorder) Encoded(e *Source) runtime.Object {
	out := &read{entries: map[string][]string{}}
	e.ObjectMeta.DeepCopyInto(&out.meta)
	fields := e.Fields(r.dataFields)
	for _, f := range fields {
		e.Entries(f, func(key, value []byte) {
			out.entries[f.Name] = append(out.entries[f.Name], string(key)+"="+string(value))
		})
	}
	e.Sorted(fields, func(key, value []byte, f Field) {
		out.sorted = append(out.sorted, f.Name+":"+string(key)+"="+string(value))
	})
	return &wrapped{read: out}
}

func (r *recorder) List(meta metav1.ListMeta, items []runtime.Object) runtime.Object {
	return &wrappedList{meta: meta, items: items}
}

func (r *recorder) Decoded(obj runtime.Object) (runtime.Object, error) {
	r.decoded = append(r.decoded, obj)
	return obj, nil
}

type wrapped struct {
	metav1.TypeMeta
	read *read
}

func (w *wrapped) DeepCopyObject() runtime.Object { return w }

type wrappedList struct {
	metav1.TypeMeta
	meta  metav1.ListMeta
	items []runtime.Object
}

func (w *wrappedList) DeepCopyObject() runtime.Object { return w }

func decoder(t testing.TB, r Reducer, keep []string, mediaType string) runtime.Decoder {
	t.Helper()
	n, ok := Sources(configMapGVK, scheme.Codecs.WithoutConversion(), keep, r)
	if !ok {
		t.Fatal("no decoding of ConfigMaps")
	}
	info, ok := runtime.SerializerInfoForMediaType(n.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no %s serializer", mediaType)
	}
	return n.DecoderToVersion(info.Serializer, corev1.SchemeGroupVersion)
}

func sample() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "shop", UID: "u-1", ResourceVersion: "77", Labels: map[string]string{"l": "v"},
			Annotations: map[string]string{"keep/me": "yes", "other": "no", metav1.InitialEventsAnnotationKey: "true"}},
		Data:       map[string]string{"b": "2", "a": "1", "both": "text"},
		BinaryData: map[string][]byte{"bin": {0, 1}, "both": []byte("bytes")},
	}
}

// A source decodes to its identity, the annotations asked for (and the one
// ending a watch's initial events), and its entries: each field's in the
// encoding, and all of them sorted, a key in two fields once, from the
// later field.
func TestSourceDecoding(t *testing.T) {
	r := &recorder{dataFields: []string{"data", "binaryData", "absentField"}}
	out, err := runtime.Decode(decoder(t, r, []string{"keep/me"}, runtime.ContentTypeProtobuf), encode(t, sample()))
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*wrapped).read
	wantMeta := metav1.ObjectMeta{Name: "app", Namespace: "shop", UID: "u-1", ResourceVersion: "77",
		Annotations: map[string]string{"keep/me": "yes", metav1.InitialEventsAnnotationKey: "true"}}
	if !reflect.DeepEqual(got.meta, wantMeta) {
		t.Errorf("metadata %+v, want %+v", got.meta, wantMeta)
	}
	// Go's protobuf encoding of a map sorts its keys.
	wantEntries := map[string][]string{"data": {"a=1", "b=2", "both=text"}, "binaryData": {"bin=\x00\x01", "both=bytes"}}
	if !reflect.DeepEqual(got.entries, wantEntries) {
		t.Errorf("entries %q, want %q", got.entries, wantEntries)
	}
	wantSorted := []string{"data:a=1", "data:b=2", "binaryData:bin=\x00\x01", "binaryData:both=bytes"}
	if !reflect.DeepEqual(got.sorted, wantSorted) {
		t.Errorf("sorted %q, want %q", got.sorted, wantSorted)
	}
	// The other order of fields: data holds "both".
	r.dataFields = []string{"binaryData", "data"}
	out, err = runtime.Decode(decoder(t, r, nil, runtime.ContentTypeProtobuf), encode(t, sample()))
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(*wrapped).read; !reflect.DeepEqual(got.sorted, []string{"data:a=1", "data:b=2", "binaryData:bin=\x00\x01", "data:both=text"}) {
		t.Errorf("sorted, fields the other way: %q", got.sorted)
	}
}

func TestFieldsOfTheKind(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{"k": {1}}}
	items, ok, err := DecodeList(encode(t, &corev1.SecretList{Items: []corev1.Secret{*secret}}))
	if err != nil || !ok || len(items) != 1 {
		t.Fatalf("decoded %v, %v, %v", items, ok, err)
	}
	fields := items[0].(*Source).Fields([]string{"stringData", "binaryData", "data"})
	if len(fields) != 2 || fields[0].Name != "stringData" || fields[0].Bytes || fields[1].Name != "data" || !fields[1].Bytes {
		t.Fatalf("a Secret's fields: %+v; want stringData (text), data (bytes)", fields)
	}
}

func TestListDecoding(t *testing.T) {
	remaining := int64(3)
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "900", Continue: "next-page", RemainingItemCount: &remaining},
		Items: []corev1.ConfigMap{*sample(), {ObjectMeta: metav1.ObjectMeta{Name: "empty"}}}}
	r := &recorder{dataFields: []string{"data"}}
	out, err := runtime.Decode(decoder(t, r, nil, runtime.ContentTypeProtobuf), encode(t, list))
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*wrappedList)
	if got.meta.ResourceVersion != "900" || got.meta.Continue != "next-page" || got.meta.RemainingItemCount == nil || *got.meta.RemainingItemCount != 3 {
		t.Fatalf("list metadata %+v", got.meta)
	}
	if len(got.items) != 2 || got.items[0].(*wrapped).read.meta.Name != "app" || got.items[1].(*wrapped).read.meta.Name != "empty" {
		t.Fatalf("items %v", got.items)
	}
	if len(r.decoded) != 0 {
		t.Fatal("a protobuf answer went to Decoded")
	}
}

// An answer in JSON, and anything decoded into a given object, decode as
// client-go does; JSON sources then go to Decoded, other kinds to nobody.
func TestOtherAnswers(t *testing.T) {
	r := &recorder{dataFields: []string{"data"}}
	data, err := runtime.Encode(scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion), sample())
	if err != nil {
		t.Fatal(err)
	}
	out, err := runtime.Decode(decoder(t, r, nil, runtime.ContentTypeJSON), data)
	if err != nil || len(r.decoded) != 1 || out != r.decoded[0] || out.(*corev1.ConfigMap).Data["a"] != "1" {
		t.Fatalf("JSON decoded to %T, %v; Decoded saw %d objects", out, err, len(r.decoded))
	}
	protobuf := decoder(t, r, nil, runtime.ContentTypeProtobuf)
	into := &corev1.ConfigMap{}
	if out, _, err := protobuf.Decode(encode(t, sample()), nil, into); err != nil || out != into || into.Data["a"] != "1" {
		t.Fatalf("decoding into a ConfigMap: %T, %v", out, err)
	}
	secret := encode(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}})
	if out, err := runtime.Decode(protobuf, secret); err != nil || reflect.TypeOf(out) != reflect.TypeOf(&corev1.Secret{}) {
		t.Fatalf("a Secret through the ConfigMaps' decoder: %T, %v", out, err)
	}
	if len(r.decoded) != 1 {
		t.Fatalf("Decoded saw %d objects, want the one JSON ConfigMap", len(r.decoded))
	}
	if _, ok := Sources(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "ConfigMap"}, scheme.Codecs, nil, r); ok {
		t.Error("a ConfigMap of another group decoded as core's")
	}
	if _, ok, _ := DecodeList([]byte(`{"kind":"ConfigMapList"}`)); ok {
		t.Error("JSON taken for protobuf")
	}
}

// A watch frame's object is handed over where the frame holds it, not
// copied: client-go decodes it before reading the next frame.
func TestWatchFrameIsReadInPlace(t *testing.T) {
	n, _ := Sources(configMapGVK, scheme.Codecs.WithoutConversion(), nil, &recorder{})
	info, _ := runtime.SerializerInfoForMediaType(n.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	base, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	object := encode(t, sample())
	var frame bytes.Buffer
	if err := base.StreamSerializer.Serializer.Encode(&metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Raw: object}}, &frame); err != nil {
		t.Fatal(err)
	}
	buf := frame.Bytes()
	var event metav1.WatchEvent
	out, gvk, err := info.StreamSerializer.Serializer.Decode(buf, nil, &event)
	if err != nil || out != &event || event.Type != "MODIFIED" || gvk.Kind != "WatchEvent" || !bytes.Equal(event.Object.Raw, object) {
		t.Fatalf("frame decoded to %v, %v, %v", out, gvk, err)
	}
	buf[len(buf)-1] ^= 0xff
	if bytes.Equal(event.Object.Raw, object) {
		t.Error("the event's object was copied out of the frame")
	}
}

// A truncated encoding fails to decode. (The envelope ends with two empty
// fields, contentEncoding and contentType: cutting those alone leaves an
// envelope as good as whole, so the cuts start inside the object.)
func TestMalformed(t *testing.T) {
	data := encode(t, sample())
	for cut := len(data) - 5; cut > len(data)-60; cut-- {
		if _, err := runtime.Decode(decoder(t, &recorder{}, nil, runtime.ContentTypeProtobuf), data[:cut]); err == nil {
			t.Fatalf("an encoding cut at %d of %d bytes decoded", cut, len(data))
		}
	}
}

// Whatever the bytes, decoding fails or succeeds, never panics, and reading
// what decoded never panics either.
func FuzzDecoding(f *testing.F) {
	f.Add(encode(f, sample()))
	f.Add(encode(f, &corev1.ConfigMapList{Items: []corev1.ConfigMap{*sample()}}))
	r := &recorder{dataFields: []string{"data", "binaryData"}}
	objects := decoder(f, r, []string{"keep/me"}, runtime.ContentTypeProtobuf)
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = runtime.Decode(objects, data)
		if items, ok, err := DecodeList(data); ok && err == nil {
			for _, item := range items {
				r.Encoded(item.(*Source))
			}
		}
	})
}

// The kind a decoded object is given is the kind's own name, not a string
// made from each object's encoding: a cache of 30,000 sources keeps that
// string in each one's TypeMeta.
func TestDecodedKindIsShared(t *testing.T) {
	r := &recorder{dataFields: []string{"data"}}
	dec := decoder(t, r, nil, runtime.ContentTypeProtobuf)
	for _, obj := range []runtime.Object{sample(), &corev1.ConfigMapList{Items: []corev1.ConfigMap{*sample()}}} {
		_, gvk, err := dec.Decode(encode(t, obj), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		k := protoKinds["ConfigMap"]
		if unsafe.StringData(gvk.Kind) != unsafe.StringData(k.kind) && unsafe.StringData(gvk.Kind) != unsafe.StringData(k.list) {
			t.Errorf("%s: the kind is a copy", gvk.Kind)
		}
	}
}
