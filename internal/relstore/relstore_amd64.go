//go:build amd64 && !race

package relstore

// Store64 stores v into *p with release order (a MOV).
//
//go:noescape
func Store64(p *uint64, v uint64)
