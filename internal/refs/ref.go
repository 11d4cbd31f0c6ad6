// Package refs finds the source objects a pod spec reads. Which fields hold
// references is data (the config file), compiled once into immutable extractors.
package refs

// Ref is one reference from a pod spec to a source object in the pod's namespace.
type Ref struct {
	// Kind is the source kind's name from the config file, e.g. "configmap".
	Kind string
	Name string
	// Keys lists the keys the reference reads; nil means the whole object.
	Keys []string
	// Optional is true when the pod starts without the object.
	Optional bool
}
