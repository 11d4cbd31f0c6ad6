package kube

import (
	"context"
	"os"
	"slices"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restart-controller/restart-controller/internal/testcluster"
)

// client talks to the one API server the tests of this package share.
var client *Client

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, "kube", func(c *testcluster.Cluster) (err error) {
		client, err = New(c.RESTConfig)
		return err
	}))
}

// Discovery answers as client-go's: the resources of a served
// group-version, NotFound for one that is not served (a CRD not installed
// yet, which the watcher looks for again later).
func TestServerResourcesForGroupVersion(t *testing.T) {
	for gv, want := range map[string]string{"v1": "configmaps", "apps/v1": "deployments"} {
		list, err := client.ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Fatalf("%s: %v", gv, err)
		}
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == want }) {
			t.Errorf("%s does not list %s: %+v", gv, want, list.APIResources)
		}
	}
	if _, err := client.ServerResourcesForGroupVersion("argoproj.io/v1alpha1"); !apierrors.IsNotFound(err) {
		t.Fatalf("a group-version that is not served: %v; want NotFound", err)
	}
}

// Secrets are created and read back; a missing one is NotFound.
func TestSecrets(t *testing.T) {
	ctx := context.Background()
	secrets := client.Secrets("default")
	if _, err := secrets.Get(ctx, "absent", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("reading a missing Secret: %v; want NotFound", err)
	}
	in := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key", Namespace: "default"}, Data: map[string][]byte{"k": []byte("v")}}
	if _, err := secrets.Create(ctx, in, metav1.CreateOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Create(ctx, in, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating it again: %v; want AlreadyExists", err)
	}
	got, err := secrets.Get(ctx, "key", metav1.GetOptions{})
	if err != nil || string(got.Data["k"]) != "v" {
		t.Fatalf("read back %+v, %v", got, err)
	}
}

// The access review answers for the caller (the test cluster's admin).
func TestReviewAccess(t *testing.T) {
	status, err := client.ReviewAccess(context.Background(), authorizationv1.ResourceAttributes{
		Namespace: "default", Verb: "list", Version: "v1", Resource: "secrets"})
	if err != nil || !status.Allowed {
		t.Fatalf("review: %+v, %v; want allowed", status, err)
	}
}

// The protobuf client reads core/v1 in protobuf.
func TestProtobufCore(t *testing.T) {
	res := client.ProtobufCore().Get().Namespace("default").Resource("configmaps").Do(context.Background())
	var contentType string
	res.ContentType(&contentType)
	if err := res.Error(); err != nil || contentType != "application/vnd.kubernetes.protobuf" {
		t.Fatalf("listing ConfigMaps: content type %q, %v", contentType, err)
	}
}
