// Package checksumkey keeps the key of the controller's checksums in a
// Secret of its own namespace. The key never leaves the process: it is not
// logged, put in an Event, a metric or an error.
package checksumkey

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restart-controller/restart-controller/internal/checksum"
)

// DataKey is the Secret's data key that holds the checksum key.
const DataKey = "key"

// Secrets reads and creates the Secrets of one namespace: client-go's typed
// SecretInterface.
type Secrets interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error)
	Create(ctx context.Context, secret *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error)
}

// Ensure returns the checksum key held in the Secret namespace/name
// (secrets are namespace's Secrets). When the
// Secret does not exist it is created with a new random key; when another
// replica creates it first, that one is used. Deleting the Secret makes a new
// key at the next start, which re-baselines every recorded checksum without
// restarting anything.
func Ensure(ctx context.Context, secrets Secrets, namespace, name string) ([]byte, error) {
	key, err := Read(ctx, secrets, namespace, name)
	if !apierrors.IsNotFound(err) {
		return key, err
	}
	fresh := make([]byte, checksum.MinKeySize)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("making a checksum key: %w", err)
	}
	_, err = secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{
			"app.kubernetes.io/name": "restart-controller", "app.kubernetes.io/component": "checksum-key"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{DataKey: fresh},
	}, metav1.CreateOptions{FieldManager: "restart-controller"})
	switch {
	case err == nil:
		return fresh, nil
	case apierrors.IsAlreadyExists(err):
		return Read(ctx, secrets, namespace, name) // another replica was first
	default:
		return nil, fmt.Errorf("creating the checksum key Secret %s/%s: %w", namespace, name, err)
	}
}

// Read returns the checksum key held in the Secret namespace/name; a
// NotFound error when there is none.
func Read(ctx context.Context, secrets Secrets, namespace, name string) ([]byte, error) {
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("reading the checksum key Secret %s/%s: %w", namespace, name, err)
	}
	key := s.Data[DataKey]
	if len(key) < checksum.MinKeySize {
		return nil, fmt.Errorf("the checksum key Secret %s/%s holds %d bytes under %q; at least %d are needed (delete it to have a new one made)",
			namespace, name, len(key), DataKey, checksum.MinKeySize)
	}
	return key, nil
}
