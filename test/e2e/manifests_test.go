package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const manifestsNamespace = "restart-controller"

// manifestObject is the identity of one object rendered from manifests/.
type manifestObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// applyName is how `kubectl apply` names the object in its output,
// e.g. deployment.apps/restart-controller or configmap/NAME.
func (o manifestObject) applyName() string {
	name := strings.ToLower(o.Kind)
	if group, _, ok := strings.Cut(o.APIVersion, "/"); ok {
		name += "." + group
	}
	return name + "/" + o.Metadata.Name
}

// renderManifests returns the documents of `kubectl kustomize manifests`.
func renderManifests(t *testing.T) []string {
	t.Helper()
	out, err := env.cluster.Kubectl(ctxFor(t), "kustomize", filepath.Join(env.repoRoot, "manifests"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var docs []string
	for _, doc := range strings.Split(out, "\n---\n") {
		if strings.TrimSpace(doc) != "" {
			docs = append(docs, doc)
		}
	}
	if len(docs) == 0 {
		t.Fatal("kubectl kustomize manifests rendered nothing")
	}
	return docs
}

// That manifests/config.yaml is examples/config.yaml needs no cluster: see
// manifests/manifests_test.go.
func TestManifestsServerSideDryRun(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	root := env.repoRoot

	docs := renderManifests(t)
	var objects []manifestObject
	for i, doc := range docs {
		var o manifestObject
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("rendered document %d: %v\n%s", i, err, doc)
		}
		if o.Kind == "" || o.Metadata.Name == "" {
			t.Fatalf("rendered document %d has no kind or name:\n%s", i, doc)
		}
		objects = append(objects, o)
	}

	t.Run("ClusterRole reads secrets with list and watch only", func(t *testing.T) {
		found := false
		for i, doc := range docs {
			if objects[i].Kind != "ClusterRole" {
				continue
			}
			found = true
			var role rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict([]byte(doc), &role); err != nil {
				t.Fatalf("ClusterRole %s: %v", objects[i].Metadata.Name, err)
			}
			for _, rule := range role.Rules {
				coreGroup := slices.Contains(rule.APIGroups, "") || slices.Contains(rule.APIGroups, "*")
				secrets := slices.Contains(rule.Resources, "secrets") || slices.Contains(rule.Resources, "*")
				if !coreGroup || !secrets {
					continue
				}
				for _, verb := range rule.Verbs {
					if verb != "list" && verb != "watch" {
						t.Errorf("ClusterRole %s grants %q on secrets (rule %+v); only list and watch are needed",
							role.Name, verb, rule)
					}
				}
			}
		}
		if !found {
			t.Fatal("no ClusterRole in manifests")
		}
	})

	// Dry-run cannot create the namespace the namespaced objects need. Other
	// tests install into the same namespace and delete it when they end; its
	// termination takes a while.
	waitNamespaceNotTerminating(t, manifestsNamespace)
	_, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: manifestsNamespace},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", manifestsNamespace, err)
	}
	t.Cleanup(func() {
		_ = env.kube.CoreV1().Namespaces().Delete(context.Background(), manifestsNamespace, metav1.DeleteOptions{})
	})

	out, err := env.cluster.Kubectl(ctx, "apply", "-k", filepath.Join(root, "manifests"), "--dry-run=server")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("kubectl apply -k manifests --dry-run=server:\n%s", out)
	lines := strings.Split(out, "\n")
	for _, o := range objects {
		want := o.applyName() + " "
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("the dry run did not list %s", o.applyName())
		}
	}
	for _, kind := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
		"RoleBinding", "ConfigMap", "Deployment", "PodDisruptionBudget", "Service"} {
		if !slices.ContainsFunc(objects, func(o manifestObject) bool { return o.Kind == kind }) {
			t.Errorf("manifests render no %s", kind)
		}
	}
}
