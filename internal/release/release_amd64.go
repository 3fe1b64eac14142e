package release

// Store64 stores v into *p with release ordering (package comment).
//
//go:noescape
func Store64(p *uint64, v uint64)
