package watch

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restwatch "k8s.io/client-go/rest/watch"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
)

// settings is a source kind client-go's scheme does not know (a CRD).
var settings = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "settings"}

// The data every transport serves, as a typed ConfigMap would carry it.
var (
	sourceData = map[string]string{"text": "hello \"world\"\n", "unicode": "grüße ✓", "empty": ""}
	sourceBin  = map[string][]byte{"bin": {0, 1, 2, 0xfe, 0xff}, "none": {}}
)

// wantDigests is computed without the catalog: a string value hashes as
// itself, a byte value as its base64 text, what JSON carries for it.
func wantDigests(data map[string]string, bin map[string][]byte) map[string]checksum.Digest {
	out := map[string]checksum.Digest{}
	for k, v := range data {
		sum := sha256.Sum256([]byte(v))
		out[k] = checksum.Digest(sum[:16])
	}
	for k, v := range bin {
		sum := sha256.Sum256([]byte(base64.StdEncoding.EncodeToString(v)))
		out[k] = checksum.Digest(sum[:16])
	}
	return out
}

func typedConfigMap(name, resourceVersion string, data map[string]string, bin map[string][]byte) corev1.ConfigMap {
	return corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, ResourceVersion: resourceVersion, UID: types.UID("uid-" + name)},
		Data:       data,
		BinaryData: bin,
	}
}

// unstructuredSource is what the dynamic client hands over: the JSON form.
func unstructuredSource(apiVersion, kind string) *unstructured.Unstructured {
	data := map[string]interface{}{}
	for k, v := range sourceData {
		data[k] = v
	}
	bin := map[string]interface{}{}
	for k, v := range sourceBin {
		bin[k] = base64.StdEncoding.EncodeToString(v)
	}
	u := &unstructured.Unstructured{Object: map[string]interface{}{"data": data, "binaryData": bin}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace("shop")
	u.SetName("app")
	u.SetResourceVersion("1")
	return u
}

// protobufServer plays an API server that answers ConfigMap lists and
// watches in protobuf only, as kube-apiserver does when asked for it. It
// refuses streaming lists (sendInitialEvents), as a server without the
// WatchList feature does, so client-go falls back to list and watch.
type protobufServer struct {
	*httptest.Server
	list   *corev1.ConfigMapList
	events chan watch.Event

	mu       sync.Mutex
	requests []seenRequest
}

type seenRequest struct {
	watch        bool
	path, accept string
}

func newProtobufServer(t *testing.T, items ...corev1.ConfigMap) *protobufServer {
	s := &protobufServer{
		list:   &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: items},
		events: make(chan watch.Event),
	}
	s.Server = httptest.NewServer(s)
	// Runs after t.Context() is cancelled, which ends the informers' watches.
	t.Cleanup(func() {
		s.CloseClientConnections()
		s.Close()
	})
	return s
}

func protobufInfo() runtime.SerializerInfo {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		panic("client-go's scheme has no protobuf serializer")
	}
	return info
}

func (s *protobufServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	isWatch := query.Get("watch") == "true" || query.Get("watch") == "1"
	s.mu.Lock()
	s.requests = append(s.requests, seenRequest{watch: isWatch, path: r.URL.Path, accept: r.Header.Get("Accept")})
	s.mu.Unlock()

	if r.URL.Path != "/api/v1/namespaces/shop/configmaps" {
		http.NotFound(w, r)
		return
	}
	info := protobufInfo()
	objects := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	switch {
	case isWatch && query.Get("sendInitialEvents") == "true":
		w.Header().Set("Content-Type", runtime.ContentTypeJSON)
		w.WriteHeader(http.StatusUnprocessableEntity)
		_ = json.NewEncoder(w).Encode(metav1.Status{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
			Status:   metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
			Message: "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
		})
	case !isWatch:
		body, err := runtime.Encode(objects, s.list)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		_, _ = w.Write(body)
	default:
		// Length-delimited frames of metav1.WatchEvent, each embedding an
		// enveloped protobuf object, as kube-apiserver streams them.
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf+";stream=watch")
		w.WriteHeader(http.StatusOK)
		flusher := w.(http.Flusher)
		flusher.Flush()
		frames := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(w), info.StreamSerializer.Serializer)
		encoder := restwatch.NewEncoder(frames, objects)
		for {
			select {
			case <-r.Context().Done():
				return
			case event := <-s.events:
				if err := encoder.Encode(&event); err != nil {
					return
				}
				flusher.Flush()
			}
		}
	}
}

func (s *protobufServer) seen() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.requests...)
}

// send hands an event to the informer's watch, once it is established.
func (s *protobufServer) send(t *testing.T, event watch.Event) {
	t.Helper()
	select {
	case s.events <- event:
	case <-time.After(5 * time.Second):
		t.Fatal("no watch to send the event to")
	}
}

func sourceConfigYAML(name string, gvr schema.GroupVersionResource) string {
	return fmt.Sprintf(`
namespaces: [shop]
sources:
  - name: %s
    group: %q
    version: %s
    resource: %s
    dataFields: [data, binaryData]
workloads:
  - {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template}
references:
  - {source: %s, from: ["volumes[*].configMap"], name: name}
`, name, gvr.Group, gvr.Version, gvr.Resource, name)
}

// Sources of kinds client-go knows are fetched in protobuf, others (or all,
// without a rest config) through the dynamic client; every way ends with the
// same reduced state, because applied checksums outlive the transport.
func TestSourceTransportsGiveTheSameDigests(t *testing.T) {
	want := wantDigests(sourceData, sourceBin)
	cases := []struct {
		name         string
		restConfig   bool // point a rest config at the protobuf server
		kind         string
		gvr          schema.GroupVersionResource
		discovery    *metav1.APIResourceList
		dynamic      []runtime.Object
		wantProtobuf bool
	}{
		{
			name:       "ConfigMaps over protobuf",
			restConfig: true, kind: "configmap", gvr: configMaps, discovery: coreV1,
			wantProtobuf: true,
		},
		{
			name: "ConfigMaps without a rest config: dynamic",
			kind: "configmap", gvr: configMaps, discovery: coreV1,
			dynamic: []runtime.Object{unstructuredSource("v1", "ConfigMap")},
		},
		{
			name:       "a kind client-go does not know: dynamic",
			restConfig: true, kind: "setting", gvr: settings,
			discovery: resourceList("example.com/v1", resource("settings", "Setting")),
			dynamic:   []runtime.Object{unstructuredSource("example.com/v1", "Setting")},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newProtobufServer(t, typedConfigMap("app", "1", sourceData, sourceBin))
			var rc *rest.Config
			if c.restConfig {
				rc = &rest.Config{Host: srv.URL}
			}
			f := newFixture(t, parseConfig(t, sourceConfigYAML(c.kind, c.gvr)), rc,
				newFakeDiscovery(c.discovery, appsV1), c.dynamic...)
			f.start(t)
			f.waitForSync(t)

			id := catalog.SourceID{Kind: c.kind, Namespace: "shop", Name: "app"}
			state, ok := f.cat.Source(id)
			if !ok {
				t.Fatalf("%v is not in the catalog", id)
			}
			if !equalDigests(state.Digests, want) {
				t.Fatalf("digests:\n got %v\nwant %v", state.Digests, want)
			}
			if state.ResourceVersion != "1" {
				t.Fatalf("resourceVersion %q, want 1", state.ResourceVersion)
			}

			// With a rest config the workloads are listed through it too, as
			// protobuf (workloadInformer): only the sources' requests count
			// below.
			all := srv.seen()
			if c.restConfig {
				deployments := slices.DeleteFunc(slices.Clone(all), func(r seenRequest) bool { return !strings.HasSuffix(r.path, "/deployments") })
				if len(deployments) == 0 {
					t.Fatalf("the Deployments were not listed through the rest config: %+v", all)
				}
				for _, r := range deployments {
					if got := firstMediaType(r.accept); got != runtime.ContentTypeProtobuf {
						t.Errorf("Deployments (watch=%v) prefer %q (Accept %q), want protobuf", r.watch, got, r.accept)
					}
				}
			}
			requests := slices.DeleteFunc(all, func(r seenRequest) bool { return strings.HasSuffix(r.path, "/deployments") })
			if !c.wantProtobuf {
				if len(requests) != 0 {
					t.Fatalf("the protobuf server was asked: %+v", requests)
				}
				if !f.listed(c.gvr) {
					t.Fatal("the dynamic client was not asked")
				}
				return
			}
			if f.listed(c.gvr) {
				t.Fatal("the dynamic client was asked for a kind client-go knows")
			}
			var lists, watches int
			for _, r := range requests {
				if r.watch {
					watches++
				} else {
					lists++
				}
				if got := firstMediaType(r.accept); got != runtime.ContentTypeProtobuf {
					t.Errorf("%s (watch=%v) prefers %q (Accept %q), want protobuf", r.path, r.watch, got, r.accept)
				}
			}
			if lists == 0 || watches == 0 {
				t.Fatalf("%d list(s) and %d watch(es), want both: %+v", lists, watches, requests)
			}
		})
	}
}

// Changes arrive through the protobuf watch stream and are reduced and keyed
// like any other.
func TestProtobufSourceWatchEvents(t *testing.T) {
	srv := newProtobufServer(t, typedConfigMap("app", "1", sourceData, sourceBin))
	f := newFixture(t, parseConfig(t, sourceConfigYAML("configmap", configMaps)), &rest.Config{Host: srv.URL},
		newFakeDiscovery(coreV1, appsV1, batchV1))
	f.start(t)
	f.waitForSync(t)
	app := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "app"}
	extra := catalog.SourceID{Kind: "configmap", Namespace: "shop", Name: "extra"}

	newData := map[string]string{"text": "changed"}
	updated := typedConfigMap("app", "2", newData, nil)
	srv.send(t, watch.Event{Type: watch.Modified, Object: &updated})
	eventually(t, "the data change is reported", func() bool {
		changed, _ := f.rec.sources()
		return len(changed) == 1 && changed[0] == app
	})
	state, _ := f.cat.Source(app)
	if want := wantDigests(newData, nil); !equalDigests(state.Digests, want) || state.ResourceVersion != "2" {
		t.Fatalf("after the update: rv %s digests %v, want rv 2 digests %v", state.ResourceVersion, state.Digests, want)
	}

	relabelled := typedConfigMap("app", "3", newData, nil)
	relabelled.Labels = map[string]string{"team": "shop"}
	srv.send(t, watch.Event{Type: watch.Modified, Object: &relabelled})
	created := typedConfigMap("extra", "4", map[string]string{"k": "v"}, nil)
	srv.send(t, watch.Event{Type: watch.Added, Object: &created})
	eventually(t, "the new source is reported", func() bool {
		_, created := f.rec.sources()
		return len(created) == 1 && created[0] == extra
	})
	if changed, _ := f.rec.sources(); len(changed) != 1 {
		t.Fatalf("a metadata-only update was reported as a change: %v", changed)
	}
	if _, ok := f.cat.Source(extra); !ok {
		t.Fatal("the new source is not in the catalog")
	}
}

func firstMediaType(accept string) string {
	first, _, _ := strings.Cut(accept, ",")
	mediaType, _, err := mime.ParseMediaType(strings.TrimSpace(first))
	if err != nil {
		return ""
	}
	return mediaType
}

func equalDigests(got checksum.Digests, want map[string]checksum.Digest) bool {
	if len(got) != len(want) {
		return false
	}
	for k, d := range want {
		if g, ok := got.Get(k); !ok || g != d {
			return false
		}
	}
	return true
}
