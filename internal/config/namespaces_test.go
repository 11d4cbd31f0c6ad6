package config

import (
	"testing"
)

// The ignored namespaces are a field selector only when every namespace is
// watched; with namespaces listed there is nothing to leave out.
func TestIgnoredNamespacesField(t *testing.T) {
	cfg, err := Parse([]byte("ignoredNamespaces: [a, b]"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.IgnoredNamespacesField(), "metadata.namespace!=a,metadata.namespace!=b"; got != want {
		t.Errorf("field selector %q, want %q", got, want)
	}
	if !cfg.NamespaceIgnored("a") || cfg.NamespaceIgnored("c") {
		t.Error("NamespaceIgnored")
	}
	if cfg, err = Parse([]byte("namespaces: [c]\nignoredNamespaces: [a]")); err != nil {
		t.Fatal(err)
	}
	if got := cfg.IgnoredNamespacesField(); got != "" {
		t.Errorf("with namespaces: field selector %q", got)
	}
}
