package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// withoutManagedFieldsDecoded is what cutManagedFields must give, decoded:
// the decoded input without metadata.managedFields (each item's, for a
// list), nothing else changed.
func withoutManagedFieldsDecoded(t testing.TB, data []byte) interface{} {
	t.Helper()
	var v map[string]interface{}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	drop := func(obj interface{}) {
		if o, ok := obj.(map[string]interface{}); ok {
			if m, ok := o["metadata"].(map[string]interface{}); ok {
				delete(m, "managedFields")
			}
		}
	}
	drop(v)
	if items, ok := v["items"].([]interface{}); ok {
		for _, item := range items {
			drop(item)
		}
	}
	return v
}

func decoded(t testing.TB, data []byte) interface{} {
	t.Helper()
	var v map[string]interface{}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v in %s", err, data)
	}
	return v
}

// A workload as the API server sends it (a Deployment the benchmark made,
// with a managedFields list added to its pod template's metadata, which
// must stay: the template hash covers it), alone, in a list, and in
// shapes that put the member first, last, alone or between others.
func TestCutManagedFields(t *testing.T) {
	deployment, err := os.ReadFile("testdata/deployment-managed-fields.json")
	if err != nil {
		t.Fatal(err)
	}
	list := []byte(`{"kind":"DeploymentList","apiVersion":"apps/v1","metadata":{"resourceVersion":"9"},"items":[` +
		string(deployment) + `,` + string(deployment) + `]}`)
	cases := map[string][]byte{
		"deployment":         deployment,
		"list":               list,
		"first":              []byte(`{"metadata":{"managedFields":[{"a":"}"}],"name":"x"},"spec":{}}`),
		"last":               []byte(`{"metadata" : { "name" : "x" , "managedFields" : [ {"a":"\"]"} ] } }`),
		"alone":              []byte(`{"metadata":{"managedFields":[]},"spec":{"metadata":{"managedFields":[]}}}`),
		"between":            []byte(`{"a":[1,2.5e3,true,null],"metadata":{"x":{"managedFields":1},"managedFields":[{}],"y":"z"}}`),
		"twice":              []byte(`{"metadata":{"managedFields":1,"name":"x","managedFields":2}}`),
		"item metadata only": []byte(`{"items":[{"spec":{"metadata":{"managedFields":[]}},"metadata":{"managedFields":[],"name":"a"}},{}]}`),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			original := string(data)
			got := cutManagedFields(data)
			if string(data) != original {
				t.Fatal("the input was changed")
			}
			if !json.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
			if want := withoutManagedFieldsDecoded(t, data); !reflect.DeepEqual(decoded(t, got), want) {
				t.Fatalf("got %s", got)
			}
			if len(got) >= len(data) {
				t.Fatalf("nothing cut: %s", got)
			}
		})
	}
	if got := cutManagedFields(deployment); len(got) > len(deployment)/2+len(deployment)/8 {
		t.Errorf("the Deployment went from %d to %d bytes: its managedFields are most of it", len(deployment), len(got))
	}
}

// What is not an object with such a member is passed on unchanged, the
// same slice, for the decoder to take or refuse.
func TestCutManagedFieldsLeavesTheRest(t *testing.T) {
	for _, s := range []string{
		``, `[]`, `"x"`, `{}`, `{"metadata":{}}`, `{"metadata":null,"items":null}`, `{"items":[1,{"metadata":{"managedFields":1}}]}`,
		`{"metadata":{"managed\u0046ields":[]}}`, `{"metadata":{"managedFields":[}}`, `{"metadata":{"managedFields":[]}`,
		`{"metadata":{"managedFields":[]}}}`[:20], `{"spec":{"template":{"metadata":{"managedFields":[]}}}}`,
	} {
		data := []byte(s)
		if got := cutManagedFields(data); string(got) != s || (len(s) > 0 && &got[0] != &data[0]) {
			t.Errorf("%s became %s", s, got)
		}
	}
}

// Any JSON object gives valid JSON that decodes to the input without the
// member. Anything else must not crash it: the scanner does not validate
// the values it skips (the decoder does that, and the API server sends
// valid JSON), so what it gives for those is not checked.
func FuzzCutManagedFields(f *testing.F) {
	deployment, err := os.ReadFile("testdata/deployment-managed-fields.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(deployment)
	f.Add([]byte(`{"items":[{"metadata":{"managedFields":[],"a":1}}]}`))
	f.Add([]byte(`{"metadata":{"x":1,"managedFields":{"b":"\\"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got := cutManagedFields(data)
		var v map[string]interface{}
		if json.Unmarshal(data, &v) != nil {
			return
		}
		if want := withoutManagedFieldsDecoded(t, data); !reflect.DeepEqual(decoded(t, got), want) {
			t.Fatalf("%q became %q", data, got)
		}
	})
}

// The workloads' client decodes lists and watch events without
// managedFields, through client-go's own paths (a server that sends them).
func TestLeanDynamicClientDecodesWithoutManagedFields(t *testing.T) {
	deployment, err := os.ReadFile("testdata/deployment-managed-fields.json")
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, deployment); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			fmt.Fprintf(w, `{"type":"MODIFIED","object":%s}`+"\n", compact.Bytes())
			return
		}
		fmt.Fprintf(w, `{"kind":"DeploymentList","apiVersion":"apps/v1","metadata":{"resourceVersion":"9"},"items":[%s]}`, compact.Bytes())
	}))
	defer srv.Close()
	client, err := leanDynamicClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	resource := client.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace("scale-0")
	check := func(how string, u *unstructured.Unstructured) {
		t.Helper()
		if u.GetName() != "w-00000" || u.GetAnnotations()["com.xing.deployment-restart"] != "enabled" {
			t.Fatalf("%s: decoded %v", how, u.Object["metadata"])
		}
		if u.GetManagedFields() != nil {
			t.Fatalf("%s: managedFields decoded", how)
		}
		if _, ok, _ := unstructured.NestedSlice(u.Object, "spec", "template", "metadata", "managedFields"); !ok {
			t.Fatalf("%s: the pod template's metadata lost a member", how)
		}
	}
	list, err := resource.List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v, %v", list, err)
	}
	check("list", &list.Items[0])
	w, err := resource.Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := <-w.ResultChan()
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		t.Fatalf("watch event %v", ev)
	}
	check("watch", u)
}
