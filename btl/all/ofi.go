package all

// RDMA fabrics through libfabric. The transport itself is built only with
// the build tag ofi (and cgo): then it registers as "ofi". Without the
// tag the package holds its tunables alone, imported here so that gorun
// --help-params lists them in every build (btl/ofi/doc.go, "Building").
import _ "github.com/gorun/gorun/btl/ofi"
