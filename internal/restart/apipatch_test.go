package restart

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/restart-controller/restart-controller/internal/catalog"
)

// APIPatch sends the body as a merge patch to the workload's own path, asks
// for the smallest answer, and reads nothing of a success: the answer here
// is no object at all, which any decoding would refuse. A refusal keeps
// what the API server said, so NotFound and Conflict are told apart as
// client-go tells them.
func TestAPIPatch(t *testing.T) {
	const body = `{"metadata":{"annotations":{"a":"b"}}}`
	for _, tc := range []struct {
		name     string
		key      catalog.WorkloadKey
		wantPath string
		status   int
		answer   string
		check    func(error) bool
	}{
		{
			name:     "grouped kind",
			key:      catalog.WorkloadKey{Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Namespace: "shop", Name: "web"},
			wantPath: "/apis/apps/v1/namespaces/shop/deployments/web",
			status:   http.StatusOK, answer: "\x00not an object",
			check: func(err error) bool { return err == nil },
		},
		{
			name:     "core kind",
			key:      catalog.WorkloadKey{Resource: schema.GroupVersionResource{Version: "v1", Resource: "replicationcontrollers"}, Namespace: "shop", Name: "old"},
			wantPath: "/api/v1/namespaces/shop/replicationcontrollers/old",
			status:   http.StatusOK, answer: "",
			check: func(err error) bool { return err == nil },
		},
		{
			name:     "gone",
			key:      catalog.WorkloadKey{Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, Namespace: "db", Name: "pg"},
			wantPath: "/apis/apps/v1/namespaces/db/statefulsets/pg",
			status:   http.StatusNotFound,
			answer:   `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"statefulsets.apps \"pg\" not found"}`,
			check:    apierrors.IsNotFound,
		},
		{
			name:     "changed meanwhile",
			key:      catalog.WorkloadKey{Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}, Namespace: "ops", Name: "agent"},
			wantPath: "/apis/apps/v1/namespaces/ops/daemonsets/agent",
			status:   http.StatusConflict,
			answer:   `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409,"message":"the object has been modified"}`,
			check:    apierrors.IsConflict,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *http.Request
			var gotBody []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r
				var err error
				if gotBody, err = io.ReadAll(r.Body); err != nil {
					t.Error(err)
				}
				if tc.status == http.StatusOK {
					w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
				} else {
					w.Header().Set("Content-Type", "application/json")
				}
				w.WriteHeader(tc.status)
				if _, err := io.WriteString(w, tc.answer); err != nil {
					t.Error(err)
				}
			}))
			defer srv.Close()
			patch, err := APIPatch(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			err = patch(context.Background(), tc.key, []byte(body))
			if !tc.check(err) {
				t.Fatalf("error %v, not what status %d means", err, tc.status)
			}
			if got == nil {
				t.Fatal("nothing was sent")
			}
			for what, pair := range map[string][2]string{
				"method":       {got.Method, http.MethodPatch},
				"path":         {got.URL.Path, tc.wantPath},
				"query":        {got.URL.RawQuery, "fieldManager=restart-controller"},
				"content type": {got.Header.Get("Content-Type"), "application/merge-patch+json"},
				"accept":       {got.Header.Get("Accept"), metadataAnswer},
				"body":         {string(gotBody), body},
			} {
				if pair[0] != pair[1] {
					t.Errorf("%s %q, want %q", what, pair[0], pair[1])
				}
			}
		})
	}
}
