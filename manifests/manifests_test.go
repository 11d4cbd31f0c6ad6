// Package manifests holds only tests: the manifests themselves are YAML for
// `kubectl apply -k manifests`. The server-side dry run of them is in test/e2e.
package manifests

import (
	"bytes"
	"os"
	"path"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of kustomization.yaml this test reads.
type kustomization struct {
	Resources          []string `json:"resources"`
	ConfigMapGenerator []struct {
		Name  string   `json:"name"`
		Files []string `json:"files"`
	} `json:"configMapGenerator"`
}

// The controller in the manifests runs with the config file a
// configMapGenerator embeds from this folder (kustomize cannot read files
// outside it). That file must be examples/config.yaml, byte for byte, so the
// documented example is what gets installed.
func TestEmbeddedConfigIsTheExample(t *testing.T) {
	var k kustomization
	readYAML(t, "kustomization.yaml", &k)

	// Where the Deployment reads its config file: --config, in a volume
	// mounted from a generated ConfigMap.
	var d appsv1.Deployment
	readYAML(t, "deployment.yaml", &d)
	var configPath string
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, arg := range c.Args {
			if p, ok := strings.CutPrefix(arg, "--config="); ok {
				configPath = p
			}
		}
		if configPath == "" {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.MountPath != path.Dir(configPath) {
				continue
			}
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name != m.Name || v.ConfigMap == nil {
					continue
				}
				file := generatedFile(t, k, v.ConfigMap.Name, path.Base(configPath))
				got, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				want, err := os.ReadFile("../examples/config.yaml")
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("manifests/%s (the controller's config file, %s, in ConfigMap %s) differs from examples/config.yaml; "+
						"copy it: cp examples/config.yaml manifests/%s", file, configPath, v.ConfigMap.Name, file)
				}
				return
			}
		}
		t.Fatalf("container %s reads --config=%s from no ConfigMap volume", c.Name, configPath)
	}
	t.Fatal("deployment.yaml runs no container with --config=PATH")
}

// generatedFile returns the file of this folder that the configMapGenerator
// named name stores under key ("key=file" or plain "file" entries).
func generatedFile(t *testing.T, k kustomization, name, key string) string {
	t.Helper()
	for _, g := range k.ConfigMapGenerator {
		if g.Name != name {
			continue
		}
		for _, entry := range g.Files {
			entryKey, file, ok := strings.Cut(entry, "=")
			if !ok {
				entryKey, file = path.Base(entry), entry
			}
			if entryKey == key {
				return file
			}
		}
		t.Fatalf("configMapGenerator %s has no file for key %s: %v", name, key, g.Files)
	}
	t.Fatalf("kustomization.yaml generates no ConfigMap %s", name)
	return ""
}

func readYAML(t *testing.T, file string, into any) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}
