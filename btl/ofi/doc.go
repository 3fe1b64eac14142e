// Package ofi is the transport for RDMA fabrics, through libfabric.
//
// (Full contract below; see docs/ofi.md for users.)
package ofi
