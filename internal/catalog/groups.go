package catalog

// SourceGroups serves the sources of a kind whose objects are not one per
// source: the members of sources of lifecycle updatesOnly (package
// members), whose caches this package does not know.
type SourceGroups interface {
	// Source returns the state of the source from its members; false when
	// it has none.
	Source(id SourceID) (*SourceState, bool)
	// Names returns the names of the sources with members in a namespace.
	Names(namespace string) []string
}

// AddSourceGroups registers how the sources of a kind of lifecycle
// updatesOnly are read: Source and regex source lists read them there.
func (c *Catalog) AddSourceGroups(kind string, g SourceGroups) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups == nil {
		c.groups = map[string]SourceGroups{}
	}
	c.groups[kind] = g
}

// sourceGroups returns the groups of a kind; false for other kinds.
func (c *Catalog) sourceGroups(kind string) (SourceGroups, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	g, ok := c.groups[kind]
	return g, ok
}
