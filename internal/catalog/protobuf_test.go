package catalog

import (
	"bytes"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/sourcecodec"
)

var (
	configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretGVK    = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
)

// encode is what kube-apiserver sends for obj in protobuf: the k8s envelope.
func encode(t testing.TB, obj k8sruntime.Object) []byte {
	t.Helper()
	info, ok := k8sruntime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), k8sruntime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	data, err := k8sruntime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// reducing returns the decoders a source informer of gvk uses for protobuf:
// objects, and watch frames.
func reducing(t testing.TB, r SourceReducer, gvk schema.GroupVersionKind) (objects, frames k8sruntime.Decoder) {
	t.Helper()
	n, ok := r.ProtobufSources(gvk, scheme.Codecs.WithoutConversion())
	if !ok {
		t.Fatalf("no protobuf decoding of %s", gvk)
	}
	info, ok := k8sruntime.SerializerInfoForMediaType(n.SupportedMediaTypes(), k8sruntime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	return n.DecoderToVersion(info.Serializer, corev1.SchemeGroupVersion), info.StreamSerializer.Serializer
}

func decodeState(t testing.TB, objects k8sruntime.Decoder, data []byte) *SourceState {
	t.Helper()
	out, err := k8sruntime.Decode(objects, data)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := out.(*SourceState)
	if !ok {
		t.Fatalf("decoded %T, want *SourceState", out)
	}
	return s
}

// protobufCases are objects whose protobuf decoding is compared with the
// reduction of the typed object: small and large, every data field, values
// of every sort, and a key in two fields (which the API server refuses for
// ConfigMaps, but the encoding can carry).
func protobufCases() []struct {
	name   string
	obj    k8sruntime.Object
	gvk    schema.GroupVersionKind
	fields []string
} {
	meta := metav1.ObjectMeta{Name: "app", Namespace: "shop", UID: "u-1", ResourceVersion: "77",
		Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 5000)},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{"f:a":{}}}`)}}}}
	small := &corev1.ConfigMap{ObjectMeta: meta,
		Data:       map[string]string{"text": "hello \"world\"\n", "empty": "", "unicode": "grüße ✓", "AAEC": "AAEC"},
		BinaryData: map[string][]byte{"bin": {0, 1, 2, 255}, "none": {}}}
	inBoth := small.DeepCopy()
	inBoth.BinaryData["text"] = []byte("in binaryData too")
	large := bigConfigMap(700, map[string][]byte{"bin": {0, 1, 2, 255}, "key-00003": {7}}, nil)
	large.ObjectMeta.ManagedFields = meta.ManagedFields
	secret := &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte("s3cr3t"), "cert": {0x30, 0x82}, "empty": {}}, StringData: map[string]string{"x": "y"}}
	largeSecret := secret.DeepCopy()
	for i := range 300 {
		largeSecret.Data[fmt.Sprintf("k%03d", i)] = []byte{byte(i)}
	}
	return []struct {
		name   string
		obj    k8sruntime.Object
		gvk    schema.GroupVersionKind
		fields []string
	}{
		{"configmap", small, configMapGVK, []string{"data", "binaryData"}},
		{"configmap, data only", small, configMapGVK, []string{"data"}},
		{"configmap, key in two fields", inBoth, configMapGVK, []string{"data", "binaryData"}},
		{"configmap, key in two fields, other order", inBoth, configMapGVK, []string{"binaryData", "data"}},
		{"configmap without data", &corev1.ConfigMap{ObjectMeta: meta}, configMapGVK, []string{"data", "binaryData"}},
		{"large configmap", large, configMapGVK, []string{"data", "binaryData"}},
		{"secret", secret, secretGVK, []string{"data"}},
		{"secret with stringData", secret, secretGVK, []string{"data", "stringData"}},
		{"large secret", largeSecret, secretGVK, []string{"data"}},
	}
}

// Decoding the protobuf encoding gives the very state that reducing the
// typed object gives, bounded or not: checksums are persisted on workloads,
// and the way an object is fetched must not change them.
func TestProtobufDecodingIsTheTypedReduction(t *testing.T) {
	for _, tc := range protobufCases() {
		for _, r := range []SourceReducer{{DataFields: tc.fields}, bounded(tc.fields)} {
			t.Run(fmt.Sprintf("%s, bounded %v", tc.name, r.Bounded), func(t *testing.T) {
				want := reduceWith(t, r, tc.obj)
				objects, _ := reducing(t, r, tc.gvk)
				got := decodeState(t, objects, encode(t, tc.obj))
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("protobuf decoding:\n%#v\nwant the typed reduction:\n%#v", got, want)
				}
				if len(got.Annotations) != 0 {
					t.Fatal("metadata beyond identity kept")
				}
			})
		}
	}
}

func TestProtobufListDecoding(t *testing.T) {
	fields := []string{"data", "binaryData"}
	remaining := int64(3)
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "900", Continue: "next-page", RemainingItemCount: &remaining}}
	for _, tc := range protobufCases()[:6] {
		list.Items = append(list.Items, *tc.obj.(*corev1.ConfigMap))
	}
	objects, _ := reducing(t, bounded(fields), configMapGVK)
	out, err := k8sruntime.Decode(objects, encode(t, list))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := out.(*SourceStateList)
	if !ok {
		t.Fatalf("decoded %T", out)
	}
	if got.ResourceVersion != "900" || got.Continue != "next-page" || got.RemainingItemCount == nil || *got.RemainingItemCount != 3 {
		t.Fatalf("list metadata %+v", got.ListMeta)
	}
	if len(got.Items) != len(list.Items) {
		t.Fatalf("%d items, want %d", len(got.Items), len(list.Items))
	}
	for i := range list.Items {
		if want := reduceWith(t, bounded(fields), &list.Items[i]); !reflect.DeepEqual(&got.Items[i], want) {
			t.Errorf("item %d:\n%#v\nwant\n%#v", i, &got.Items[i], want)
		}
	}
	if c := got.DeepCopyObject(); !reflect.DeepEqual(c, got) {
		t.Error("DeepCopyObject differs")
	}
	// The same, answered in JSON: decoded, then reduced.
	n, _ := bounded(fields).ProtobufSources(configMapGVK, scheme.Codecs.WithoutConversion())
	info, _ := k8sruntime.SerializerInfoForMediaType(n.SupportedMediaTypes(), k8sruntime.ContentTypeJSON)
	data, err := k8sruntime.Encode(scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion), list)
	if err != nil {
		t.Fatal(err)
	}
	out, err = k8sruntime.Decode(n.DecoderToVersion(info.Serializer, corev1.SchemeGroupVersion), data)
	if err != nil {
		t.Fatal(err)
	}
	if fromJSON, ok := out.(*SourceStateList); !ok || !reflect.DeepEqual(fromJSON.Items, got.Items) || fromJSON.ResourceVersion != "900" {
		t.Fatalf("JSON list decoded to %#v", out)
	}
}

// A watch frame's object is read in place, and the state decoded from it
// keeps nothing of the frame: client-go reads the next frame into the same
// buffer.
func TestProtobufWatchFramesAreNotKept(t *testing.T) {
	fields := []string{"data", "binaryData"}
	for _, tc := range protobufCases()[:6] {
		objects, frames := reducing(t, bounded(fields), configMapGVK)
		info, _ := k8sruntime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), k8sruntime.ContentTypeProtobuf)
		var frame bytes.Buffer
		if err := info.StreamSerializer.Serializer.Encode(&metav1.WatchEvent{Type: "MODIFIED", Object: k8sruntime.RawExtension{Raw: encode(t, tc.obj)}}, &frame); err != nil {
			t.Fatal(err)
		}
		buf := frame.Bytes()
		var event metav1.WatchEvent
		out, _, err := frames.Decode(buf, nil, &event)
		if err != nil || out != &event || event.Type != "MODIFIED" {
			t.Fatalf("%s: frame decoded to %v, %v", tc.name, out, err)
		}
		state := decodeState(t, objects, event.Object.Raw)
		want := state.DeepCopyObject()
		for i := range buf {
			buf[i] = 'X' // the next frame
		}
		if !reflect.DeepEqual(state, want) || !reflect.DeepEqual(state, reduceWith(t, bounded(fields), tc.obj)) {
			t.Fatalf("%s: the state changed with the frame buffer", tc.name)
		}
	}
}

// The informer ends its initial list at a bookmark annotated so; that one
// annotation is kept, no other.
func TestProtobufBookmark(t *testing.T) {
	objects, _ := reducing(t, bounded([]string{"data"}), configMapGVK)
	bookmark := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1234",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true", "other": "x"}}}
	state := decodeState(t, objects, encode(t, bookmark))
	if state.ResourceVersion != "1234" || !reflect.DeepEqual(state.Annotations, map[string]string{metav1.InitialEventsAnnotationKey: "true"}) {
		t.Fatalf("bookmark decoded to %+v", state.Meta)
	}
}

// Other kinds, and anything asked to decode into a given object, decode as
// client-go does.
func TestProtobufOtherObjects(t *testing.T) {
	objects, _ := reducing(t, bounded([]string{"data"}), configMapGVK)
	status := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"}
	info, _ := k8sruntime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), k8sruntime.ContentTypeProtobuf)
	data, err := k8sruntime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, metav1.SchemeGroupVersion), status)
	if err != nil {
		t.Fatal(err)
	}
	out, err := k8sruntime.Decode(objects, data)
	if got, ok := out.(*metav1.Status); err != nil || !ok || got.Code != 410 {
		t.Fatalf("a Status decoded to %#v, %v", out, err)
	}
	secret := encode(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}})
	if out, err := k8sruntime.Decode(objects, secret); err != nil || reflect.TypeOf(out) != reflect.TypeOf(&corev1.Secret{}) {
		t.Fatalf("a Secret through the ConfigMaps' decoder: %T, %v", out, err)
	}
	into := &corev1.ConfigMap{}
	if out, _, err := objects.Decode(encode(t, protobufCases()[0].obj), nil, into); err != nil || out != into || into.Data["text"] == "" {
		t.Fatalf("decoding into a ConfigMap: %T, %v", out, err)
	}
	if _, ok := bounded(nil).ProtobufSources(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "ConfigMap"}, scheme.Codecs); ok {
		t.Error("a ConfigMap of another group decoded as core's")
	}
}

// A key reader fetching a protobuf list reduces it like the typed objects.
func TestDecodeProtobufListForKeyReads(t *testing.T) {
	fields := []string{"data", "binaryData"}
	large := protobufCases()[5].obj.(*corev1.ConfigMap)
	items, ok, err := sourcecodec.DecodeList(encode(t, &corev1.ConfigMapList{Items: []corev1.ConfigMap{*large}}))
	if err != nil || !ok || len(items) != 1 {
		t.Fatalf("decoded %v, %v, %v", items, ok, err)
	}
	if name := items[0].(metav1.Object).GetName(); name != "big" {
		t.Fatalf("name %q", name)
	}
	keys := []string{"absent", "bin", "key-00003", "text"}
	got, err := ReduceKeys(items[0], fields, keys)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ReduceKeys(large, fields, keys)
	if !reflect.DeepEqual(got.Digests, want.Digests) || !reflect.DeepEqual(got.Fields, want.Fields) || got.Data != want.Data || len(got.Digests) != 3 {
		t.Fatalf("keyed read of the encoding %v %v, of the typed object %v %v", got.Digests, got.Fields, want.Digests, want.Fields)
	}
	if _, ok, _ := sourcecodec.DecodeList([]byte(`{"kind":"ConfigMapList"}`)); ok {
		t.Error("JSON taken for protobuf")
	}
}

// Decoding a ConfigMap of 80,000 empty keys (a valid 1 MB one) allocates
// little besides the list of its entries: decoding it into a typed object
// takes about ten times more. The race detector, which CI always uses, adds
// nothing to what the heap counts, so this runs under it too.
func TestProtobufDecodingAllocatesLittle(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "unrelated"}, Data: map[string]string{}}
	for i := range 80000 {
		cm.Data[fmt.Sprintf("%04x", i)] = ""
	}
	data := encode(t, cm)
	objects, _ := reducing(t, bounded([]string{"data", "binaryData"}), configMapGVK)
	allocated := func(decoder k8sruntime.Decoder) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if _, err := k8sruntime.Decode(decoder, data); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	ours, typed := allocated(objects), allocated(scheme.Codecs.UniversalDeserializer())
	t.Logf("decoding %d bytes: %d bytes allocated; typed: %d", len(data), ours, typed)
	if typed < uint64(len(data)) {
		t.Errorf("control: decoding into a typed object, which copies every key, allocated %d bytes, less than the %d of the encoding: the measure is off", typed, len(data))
	}
	// The API server encodes a map sorted, so no index of the entries is
	// made to sort them (12 bytes an entry, 960 kB here).
	if ours > 64<<10 {
		t.Errorf("decoding allocated %d bytes: an encoding in order needs no list of its entries", ours)
	}
}

// An encoding whose one data field is out of order, which the API server
// never writes but the wire format allows, is sorted before its checksums
// are taken: the same state as the typed reduction, which reads a map.
func TestProtobufLargeSourceOutOfOrder(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "shop"}, Data: map[string]string{}}
	for i := range MaxDigestKeys + 10 {
		cm.Data[fmt.Sprintf("key-%05d", i)] = "v"
	}
	data := encode(t, cm)
	// Swap the encodings of two entries of the same length.
	entry := func(key string) []byte {
		e := protowire.AppendTag(nil, 1, protowire.BytesType)
		e = protowire.AppendString(e, key)
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		e = protowire.AppendString(e, "v")
		return protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), e)
	}
	a, b := entry("key-00001"), entry("key-00200")
	i, j := bytes.Index(data, a), bytes.Index(data, b)
	if i < 0 || j < 0 {
		t.Fatalf("entries not found in the encoding (%d, %d)", i, j)
	}
	swapped := slices.Clone(data)
	copy(swapped[i:], b)
	copy(swapped[j:], a)
	for _, r := range []SourceReducer{{DataFields: []string{"data"}}, bounded([]string{"data", "binaryData"})} {
		objects, _ := reducing(t, r, configMapGVK)
		got, want := decodeState(t, objects, swapped), reduceWith(t, r, cm)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("bounded %v: out of order %#v, want the typed reduction %#v", r.Bounded, got, want)
		}
		if in := decodeState(t, objects, data); !reflect.DeepEqual(in, want) {
			t.Errorf("bounded %v: in order %#v, want the typed reduction %#v", r.Bounded, in, want)
		}
	}
}

// wellFormed checks what decoding gave, when it gave sources: each state
// sorted, each key once, in one form (per key or large), and copied whole.
func wellFormed(t *testing.T, out k8sruntime.Object) {
	t.Helper()
	var states []*SourceState
	switch o := out.(type) {
	case *SourceState:
		states = append(states, o)
	case *SourceStateList:
		for i := range o.Items {
			states = append(states, &o.Items[i])
		}
	}
	for _, s := range states {
		if s.Large() == (s.Digests != nil) {
			t.Fatalf("%s: large %v with digests %v", s.Name, s.Large(), s.Digests)
		}
		if !slices.IsSortedFunc(s.Digests, func(a, b checksum.KeyDigest) int { return strings.Compare(a.Key, b.Key) }) ||
			len(slices.CompactFunc(slices.Clone(s.Digests), func(a, b checksum.KeyDigest) bool { return a.Key == b.Key })) != len(s.Digests) {
			t.Fatalf("%s: digests not sorted, or a key twice: %v", s.Name, s.Digests.Keys())
		}
		if c := s.DeepCopyObject(); !reflect.DeepEqual(c, s) {
			t.Fatalf("%s: DeepCopyObject differs", s.Name)
		}
	}
}

// Whatever the bytes, decoding fails or succeeds, never panics, and what
// it gives is well formed.
func FuzzProtobufDecoding(f *testing.F) {
	for _, tc := range protobufCases()[:4] {
		data := encode(f, tc.obj)
		f.Add(data)
		var frame bytes.Buffer
		info, _ := k8sruntime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), k8sruntime.ContentTypeProtobuf)
		if err := info.StreamSerializer.Serializer.Encode(&metav1.WatchEvent{Type: "ADDED", Object: k8sruntime.RawExtension{Raw: data}}, &frame); err != nil {
			f.Fatal(err)
		}
		f.Add(frame.Bytes())
	}
	f.Add(encode(f, &corev1.ConfigMapList{Items: []corev1.ConfigMap{*protobufCases()[0].obj.(*corev1.ConfigMap)}}))
	fields := []string{"data", "binaryData"}
	objects, frames := reducing(f, bounded(fields), configMapGVK)
	f.Fuzz(func(t *testing.T, data []byte) {
		if out, err := k8sruntime.Decode(objects, data); err == nil {
			wellFormed(t, out)
		}
		var event metav1.WatchEvent
		if _, _, err := frames.Decode(data, nil, &event); err == nil {
			if out, err := k8sruntime.Decode(objects, event.Object.Raw); err == nil {
				wellFormed(t, out)
			}
		}
		if items, ok, err := sourcecodec.DecodeList(data); ok && err == nil {
			for _, item := range items {
				e, err := ReduceKeys(item, fields, []string{"a", "b"})
				if err != nil {
					continue
				}
				for k := range e.Digests {
					if k != "a" && k != "b" {
						t.Fatalf("a read of keys a and b gave the digest of %q", k)
					}
				}
			}
		}
	})
}

// A well-formed ConfigMap of any keys and values, small or large, decodes
// to the typed reduction.
func FuzzProtobufSourceIsTheTypedReduction(f *testing.F) {
	f.Add("k", "v", uint16(3))
	f.Add("", "", uint16(MaxDigestKeys))
	f.Add("ü\x00", "AAEC", uint16(MaxDigestKeys+1))
	fields := []string{"data", "binaryData"}
	decoders := map[bool]k8sruntime.Decoder{}
	for _, r := range []SourceReducer{{DataFields: fields}, bounded(fields)} {
		decoders[r.Bounded], _ = reducing(f, r, configMapGVK)
	}
	f.Fuzz(func(t *testing.T, key, value string, n uint16) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "n"},
			Data: map[string]string{key: value}, BinaryData: map[string][]byte{value: []byte(key)}}
		for i := range int(n % 400) {
			cm.Data[fmt.Sprintf("%s%d", key, i)] = value
		}
		data := encode(t, cm)
		for _, r := range []SourceReducer{{DataFields: fields}, bounded(fields)} {
			if got, want := decodeState(t, decoders[r.Bounded], data), reduceWith(t, r, cm); !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded %#v, want %#v", got, want)
			}
		}
	})
}

// The annotations a reducer keeps (fleet safety's ignore and release) come
// through both ways of decoding alike, and no other.
func TestKeptAnnotations(t *testing.T) {
	r := bounded([]string{"data"})
	r.Keep = []string{"example.com/ignore", "example.com/release"}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "shop", ResourceVersion: "7", Annotations: map[string]string{
			"example.com/ignore": "true", "example.com/release": "0123456789abcdef", "other": "x",
			"kubectl.kubernetes.io/last-applied-configuration": "{...}",
		}},
		Data: map[string]string{"k": "v"},
	}
	want := map[string]string{"example.com/ignore": "true", "example.com/release": "0123456789abcdef"}
	objects, _ := reducing(t, r, configMapGVK)
	if got := decodeState(t, objects, encode(t, cm)); !reflect.DeepEqual(got.Annotations, want) {
		t.Fatalf("protobuf: annotations %v, want %v", got.Annotations, want)
	}
	if got := reduceWith(t, r, cm); !reflect.DeepEqual(got.Annotations, want) {
		t.Fatalf("typed: annotations %v, want %v", got.Annotations, want)
	}
}
