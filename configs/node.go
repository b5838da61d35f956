package configs

// A Node is where a decoded value stood in its file, so that the checks a
// format makes after decoding (a link to a device the profile lacks, a
// memory cap no device has) can name a line. Decode returns the document's;
// its methods treat a nil Node as an absent value.
type Node struct {
	Line    int // the value's line
	KeyLine int // its key's line, for a mapping's value; otherwise Line

	list  bool
	keys  []string // a mapping's keys, in file order
	elems []*Node  // a mapping's values (in the order of keys) or a list's items
}

// Get returns the node of key's value in mapping n, or nil when n is nil,
// not a mapping or has no such key.
func (n *Node) Get(key string) *Node {
	if n == nil {
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.elems[i]
		}
	}
	return nil
}

// Has reports whether mapping n has key, with a value or without.
func (n *Node) Has(key string) bool { return n.Get(key) != nil }

// Keys returns mapping n's keys in file order.
func (n *Node) Keys() []string {
	if n == nil {
		return nil
	}
	return n.keys
}

// Items returns list n's items, or nil for any other node.
func (n *Node) Items() []*Node {
	if n == nil || !n.list {
		return nil
	}
	return n.elems
}

// LineOf returns the line of key's value in mapping n, or n's own line when
// key is absent: the line to blame for a bad or a missing value.
func (n *Node) LineOf(key string) int {
	if v := n.Get(key); v != nil {
		return v.Line
	}
	if n == nil {
		return 1
	}
	return n.Line
}
