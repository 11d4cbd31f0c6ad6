package refs

// Fields returns the field names of a wildcard-free path, for building a patch
// that reaches the same place; ok is false when the path fans out.
func (p Path) Fields() (fields []string, ok bool) {
	fields = make([]string, len(p.segs))
	for i, s := range p.segs {
		if s.each {
			return nil, false
		}
		fields[i] = s.name
	}
	return fields, true
}
