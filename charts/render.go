// Package charts renders the Helm charts in this folder, for their tests and
// for test/e2e. helm itself is built from its Go module by hack/build-helm.sh
// (once per version, cached outside the work tree).
package charts

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/restart-controller/restart-controller/internal/testcluster"
	"sigs.k8s.io/yaml"
)

// Object is one rendered Kubernetes object.
type Object map[string]interface{}

// Kind is the object's kind.
func (o Object) Kind() string { s, _ := o["kind"].(string); return s }

// Name is metadata.name.
func (o Object) Name() string { return o.str("metadata", "name") }

// Namespace is metadata.namespace.
func (o Object) Namespace() string { return o.str("metadata", "namespace") }

func (o Object) str(path ...string) string {
	var cur interface{} = map[string]interface{}(o)
	for _, p := range path {
		m, ok := cur.(map[string]interface{})
		if !ok {
			return ""
		}
		cur = m[p]
	}
	s, _ := cur.(string)
	return s
}

// Into decodes the object strictly into a typed value, e.g. *appsv1.Deployment.
func (o Object) Into(v interface{}) error {
	b, err := yaml.Marshal(map[string]interface{}(o))
	if err != nil {
		return err
	}
	return yaml.UnmarshalStrict(b, v)
}

// Root is the repository root.
func Root() (string, error) { return testcluster.RepoRoot() }

// Helm runs hack/build-helm.sh and returns the helm binary's path. The first
// run builds helm (minutes); later runs return at once from the cache.
func Helm(ctx context.Context) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "build-helm.sh"))
	cmd.Dir = root
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(&stderr, os.Stderr)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/build-helm.sh: %w\n%s", err, stderr.String())
	}
	path := strings.TrimSpace(stdout.String())
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("hack/build-helm.sh printed %q: %w", path, err)
	}
	return path, nil
}

// Chart is the path of the restart-controller chart.
func Chart(root string) string { return filepath.Join(root, "charts", "restart-controller") }

// Render runs `helm template RELEASE CHART --namespace NS ARGS...` and decodes
// every document. A failed render returns helm's message in the error.
func Render(ctx context.Context, helm, chart, release, namespace string, args ...string) ([]Object, error) {
	cmd := exec.CommandContext(ctx, helm, append([]string{"template", release, chart, "--namespace", namespace}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm template %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return Decode(stdout.Bytes())
}

// Decode splits a multi-document YAML stream and decodes each object.
func Decode(stream []byte) ([]Object, error) {
	var objects []Object
	for i, doc := range strings.Split("\n"+string(stream), "\n---") {
		var o Object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return nil, fmt.Errorf("document %d: %w\n%s", i, err, doc)
		}
		if len(o) == 0 {
			continue
		}
		if o.Kind() == "" || o.Name() == "" {
			return nil, fmt.Errorf("document %d has no kind or name:\n%s", i, doc)
		}
		objects = append(objects, o)
	}
	return objects, nil
}
