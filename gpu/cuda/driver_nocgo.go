//go:build !cgo

package cuda

// This file stands in for the driver when the binary is built without cgo
// (CGO_ENABLED=0): Init reports ErrNoDriver, so nothing below is ever reached
// with a live handle; each stub fails with ErrorNotInitialized.

import (
	"errors"
	"unsafe"
)

const maxKernelArgs = 16

const cgoEnabled = false

func drvLoad() error { return errors.New("built without cgo (CGO_ENABLED=0): GPU support is off") }

func drvInit() Result { return ErrorNotInitialized }

func drvDriverGetVersion() (int, Result) { return 0, ErrorNotInitialized }

func drvGetErrorName(_ Result) string { return "" }

func drvGetErrorString(_ Result) string { return "" }

func drvDeviceGetCount() (int, Result) { return 0, ErrorNotInitialized }

func drvDeviceGet(_ int) (int, Result) { return 0, ErrorNotInitialized }

func drvDeviceGetName(_ int) (string, Result) { return "", ErrorNotInitialized }

func drvDeviceGetAttribute(_, _ int) (int, Result) { return 0, ErrorNotInitialized }

func drvDeviceTotalMem(_ int) (uint64, Result) { return 0, ErrorNotInitialized }

func drvDeviceGetPCIBusID(_ int) (string, Result) { return "", ErrorNotInitialized }

func drvDeviceGetUUID(_ int) ([16]byte, Result) { return [16]byte{}, ErrorNotInitialized }

func drvDeviceCanAccessPeer(_, _ int) (bool, Result) { return false, ErrorNotInitialized }

func drvPrimaryCtxRetain(_ int) (uintptr, Result) { return 0, ErrorNotInitialized }

func drvPrimaryCtxRelease(_ int) Result { return ErrorNotInitialized }

func drvPrimaryCtxGetState(_ int) (uint32, bool, Result) { return 0, false, ErrorNotInitialized }

func drvPrimaryCtxSetFlags(_ int, _ uint32) Result { return ErrorNotInitialized }

func drvCtxSynchronize(_ uintptr) Result { return ErrorNotInitialized }

func drvCtxSetCurrent(_ uintptr) Result { return ErrorNotInitialized }

func drvCtxGetCurrent() (uintptr, Result) { return 0, ErrorNotInitialized }

func drvCtxEnablePeerAccess(_, _ uintptr) Result { return ErrorNotInitialized }

func drvMemGetInfo(_ uintptr) (free, total uint64, r Result) { return 0, 0, ErrorNotInitialized }

func drvMemAlloc(_ uintptr, _ uint64) (DevicePtr, Result) { return 0, ErrorNotInitialized }

func drvMemFree(_ uintptr, _ DevicePtr) Result { return ErrorNotInitialized }

func drvMemHostAlloc(_ uintptr, _ uint64, _ uint32) (unsafe.Pointer, Result) {
	return nil, ErrorNotInitialized
}

func drvMemFreeHost(_ uintptr, _ unsafe.Pointer) Result { return ErrorNotInitialized }

func drvMemGetAddressRange(_ uintptr, _ DevicePtr) (DevicePtr, uint64, Result) {
	return 0, 0, ErrorNotInitialized
}

func drvMemcpy(_ uintptr, _, _ DevicePtr, _ uint64) Result { return ErrorNotInitialized }

func drvMemcpyAsync(_ uintptr, _, _ DevicePtr, _ uint64, _ uintptr) Result {
	return ErrorNotInitialized
}

func drvMemcpyHtoD(_ uintptr, _ DevicePtr, _ unsafe.Pointer, _ uint64) Result {
	return ErrorNotInitialized
}

func drvMemcpyDtoH(_ uintptr, _ unsafe.Pointer, _ DevicePtr, _ uint64) Result {
	return ErrorNotInitialized
}

func drvMemcpyDtoD(_ uintptr, _, _ DevicePtr, _ uint64) Result { return ErrorNotInitialized }

func drvMemcpyHtoDAsync(_ uintptr, _ DevicePtr, _ unsafe.Pointer, _ uint64, _ uintptr) Result {
	return ErrorNotInitialized
}

func drvMemcpyBatchAsync(_ uintptr, _, _, _ *uint64, _ int, _ uintptr) Result {
	return ErrorNotInitialized
}

func drvHasMemcpyBatch() bool { return false }

func drvMemcpyDtoHAsync(_ uintptr, _ unsafe.Pointer, _ DevicePtr, _ uint64, _ uintptr) Result {
	return ErrorNotInitialized
}

func drvMemcpyDtoDAsync(_ uintptr, _, _ DevicePtr, _ uint64, _ uintptr) Result {
	return ErrorNotInitialized
}

func drvMemcpyPeerAsync(_ uintptr, _ DevicePtr, _ uintptr, _ DevicePtr, _ uintptr, _ uint64, _ uintptr) Result {
	return ErrorNotInitialized
}

func drvMemsetD8Async(_ uintptr, _ DevicePtr, _ byte, _ uint64, _ uintptr) Result {
	return ErrorNotInitialized
}

func drvStreamCreate(_ uintptr, _ uint32) (uintptr, Result) { return 0, ErrorNotInitialized }

func drvStreamDestroy(_, _ uintptr) Result { return ErrorNotInitialized }

func drvStreamSynchronize(_, _ uintptr) Result { return ErrorNotInitialized }

func drvStreamQuery(_, _ uintptr) Result { return ErrorNotInitialized }

func drvStreamWaitEvent(_, _, _ uintptr) Result { return ErrorNotInitialized }

func drvEventCreate(_ uintptr, _ uint32) (uintptr, Result) { return 0, ErrorNotInitialized }

func drvEventDestroy(_, _ uintptr) Result { return ErrorNotInitialized }

func drvEventRecord(_, _, _ uintptr) Result { return ErrorNotInitialized }

func drvEventSynchronize(_, _ uintptr) Result { return ErrorNotInitialized }

func drvEventQuery(_, _ uintptr) Result { return ErrorNotInitialized }

func drvEventElapsedTime(_, _, _ uintptr) (float32, Result) { return 0, ErrorNotInitialized }

func drvIpcGetMemHandle(_ uintptr, _ DevicePtr) ([64]byte, Result) {
	return [64]byte{}, ErrorNotInitialized
}

func drvIpcOpenMemHandle(_ uintptr, _ [64]byte, _ uint32) (DevicePtr, Result) {
	return 0, ErrorNotInitialized
}

func drvIpcCloseMemHandle(_ uintptr, _ DevicePtr) Result { return ErrorNotInitialized }

func drvIpcGetEventHandle(_, _ uintptr) ([64]byte, Result) { return [64]byte{}, ErrorNotInitialized }

func drvIpcOpenEventHandle(_ uintptr, _ [64]byte) (uintptr, Result) { return 0, ErrorNotInitialized }

func drvPointerGetAttribute(_ uintptr, _ int, _ uintptr) (uint64, Result) {
	return 0, ErrorNotInitialized
}

func drvModuleLoadData(_ uintptr, _ []byte) (uintptr, string, Result) {
	return 0, "", ErrorNotInitialized
}

func drvModuleUnload(_, _ uintptr) Result { return ErrorNotInitialized }

func drvModuleGetFunction(_, _ uintptr, _ string) (uintptr, Result) { return 0, ErrorNotInitialized }

func drvOccupancy(_, _ uintptr, _, _ int) (int, Result) { return 0, ErrorNotInitialized }

func drvLaunchKernel(_, _ uintptr, _, _ [3]uint32, _ uint32, _ uintptr, _ *[maxKernelArgs]uint64, _ int) Result {
	return ErrorNotInitialized
}
