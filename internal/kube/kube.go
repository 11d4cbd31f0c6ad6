// Package kube makes the few typed API calls of the controller (Secrets,
// Leases, Events, access reviews and discovery of one group-version) on REST
// clients whose private scheme registers only the API groups it uses.
//
// Why not client-go's typed clients: each of them imports
// k8s.io/client-go/kubernetes/scheme, which registers every API group in its
// init, and so links all of k8s.io/api (about 7 MB of the controller's
// 17 MB of code and data; BENCHMARKS.md, "Binary and idle memory"). A
// scheme of four groups links those four.
package kube

import (
	"context"
	"fmt"
	"net/http"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
)

// Scheme knows the API groups of this package's clients and nothing else.
// Callers may read it (Recognizes, New) but never register into it.
var Scheme = newScheme()

// Codecs are the codecs of Scheme.
var Codecs = serializer.NewCodecFactory(Scheme)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, coordinationv1.AddToScheme, eventsv1.AddToScheme, authorizationv1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s
}

// discoveryTimeout bounds one discovery request, as client-go's discovery
// client does (its defaultTimeout): lookUp has no context of its own.
const discoveryTimeout = 32 * time.Second

// Client makes the controller's typed calls. Its REST clients share one
// HTTP client (one connection pool) with each other.
type Client struct {
	core, coordination, events, authorization, discovery *rest.RESTClient
	protobufCore                                         *rest.RESTClient
}

// New makes the clients of rc's API server.
func New(rc *rest.Config) (*Client, error) {
	httpClient, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("creating the HTTP client: %w", err)
	}
	c := &Client{}
	for _, g := range []struct {
		client   **rest.RESTClient
		gv       schema.GroupVersion
		protobuf bool
	}{
		{&c.core, corev1.SchemeGroupVersion, false},
		{&c.protobufCore, corev1.SchemeGroupVersion, true},
		{&c.coordination, coordinationv1.SchemeGroupVersion, false},
		{&c.events, eventsv1.SchemeGroupVersion, false},
		{&c.authorization, authorizationv1.SchemeGroupVersion, false},
	} {
		if *g.client, err = restClient(rc, httpClient, g.gv, g.protobuf); err != nil {
			return nil, err
		}
	}
	cfg := rest.CopyConfig(rc)
	cfg.APIPath, cfg.GroupVersion = "", nil
	cfg.NegotiatedSerializer = Codecs.WithoutConversion()
	// The same connections, with a timeout on each request (sent to the API
	// server as ?timeout= too), as client-go's discovery client has.
	timed := *httpClient
	if timed.Timeout == 0 {
		timed.Timeout = discoveryTimeout
	}
	if c.discovery, err = rest.UnversionedRESTClientForConfigAndClient(cfg, &timed); err != nil {
		return nil, fmt.Errorf("creating the discovery client: %w", err)
	}
	return c, nil
}

// RESTConfigFor is rc set up for one group-version of Scheme, in protobuf
// (answers in JSON still accepted) or JSON.
func RESTConfigFor(rc *rest.Config, gv schema.GroupVersion, protobuf bool) *rest.Config {
	cfg := rest.CopyConfig(rc)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	if protobuf {
		cfg.ContentType = runtime.ContentTypeProtobuf
		cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	} else {
		cfg.ContentType = runtime.ContentTypeJSON
	}
	cfg.NegotiatedSerializer = Codecs.WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return cfg
}

func restClient(rc *rest.Config, httpClient *http.Client, gv schema.GroupVersion, protobuf bool) (*rest.RESTClient, error) {
	c, err := rest.RESTClientForConfigAndClient(RESTConfigFor(rc, gv, protobuf), httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the %s client: %w", gv, err)
	}
	return c, nil
}

// ProtobufCore is the core/v1 client that speaks protobuf: source data is
// the bulk of what the controller reads.
func (c *Client) ProtobufCore() *rest.RESTClient { return c.protobufCore }

// Secrets is the Secrets of one namespace.
func (c *Client) Secrets(namespace string) Secrets {
	return Secrets{client: c.core, namespace: namespace}
}

// Secrets reads and creates the Secrets of one namespace.
type Secrets struct {
	client    *rest.RESTClient
	namespace string
}

// Get reads the Secret name.
func (s Secrets) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	out := &corev1.Secret{}
	err := s.client.Get().Namespace(s.namespace).Resource("secrets").Name(name).
		VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	return out, err
}

// Create creates the Secret.
func (s Secrets) Create(ctx context.Context, secret *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error) {
	out := &corev1.Secret{}
	err := s.client.Post().Namespace(s.namespace).Resource("secrets").
		VersionedParams(&opts, metav1.ParameterCodec).Body(secret).Do(ctx).Into(out)
	return out, err
}

// GetLease reads the Lease namespace/name.
func (c *Client) GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.coordination.Get().Namespace(namespace).Resource("leases").Name(name).Do(ctx).Into(out)
	return out, err
}

// CreateLease creates the Lease.
func (c *Client) CreateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.coordination.Post().Namespace(lease.Namespace).Resource("leases").Body(lease).Do(ctx).Into(out)
	return out, err
}

// UpdateLease replaces the Lease; its resourceVersion makes the write
// conditional (a Conflict error when someone else wrote it since).
func (c *Client) UpdateLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.coordination.Put().Namespace(lease.Namespace).Resource("leases").Name(lease.Name).Body(lease).Do(ctx).Into(out)
	return out, err
}

// CreateEvent creates the Event.
func (c *Client) CreateEvent(ctx context.Context, event *eventsv1.Event) (*eventsv1.Event, error) {
	out := &eventsv1.Event{}
	err := c.events.Post().Namespace(event.Namespace).Resource("events").Body(event).Do(ctx).Into(out)
	return out, err
}

// PatchEvent applies a merge patch to the Event namespace/name.
func (c *Client) PatchEvent(ctx context.Context, namespace, name string, patch []byte) (*eventsv1.Event, error) {
	out := &eventsv1.Event{}
	err := c.events.Patch(types.MergePatchType).Namespace(namespace).Resource("events").Name(name).Body(patch).Do(ctx).Into(out)
	return out, err
}

// ReviewAccess creates a SelfSubjectAccessReview of attrs and returns its
// status.
func (c *Client) ReviewAccess(ctx context.Context, attrs authorizationv1.ResourceAttributes) (authorizationv1.SubjectAccessReviewStatus, error) {
	out := &authorizationv1.SelfSubjectAccessReview{}
	err := c.authorization.Post().Resource("selfsubjectaccessreviews").
		Body(&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}).
		Do(ctx).Into(out)
	return out.Status, err
}

// ServerResourcesForGroupVersion lists the resources the API server serves
// in groupVersion ("v1" is the core group), as client-go's discovery client
// does: a group-version that is not served is a NotFound error, except the
// core one, which is then an empty list.
func (c *Client) ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error) {
	path := "/apis/" + groupVersion
	if groupVersion == "v1" {
		path = "/api/v1"
	}
	out := &metav1.APIResourceList{GroupVersion: groupVersion}
	err := c.discovery.Get().AbsPath(path).Do(context.TODO()).Into(out)
	if err != nil {
		if groupVersion == "v1" && apierrors.IsNotFound(err) {
			return out, nil
		}
		return nil, err
	}
	return out, nil
}
