//go:build darwin

package mtl

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
)

// The Objective-C messages this package sends, each as a Go function of the
// exact C signature bound once to objc_msgSend (purego.RegisterFunc): a call
// through a typed function skips the per-call reflection of objc.ID.Send's
// variadic arguments, which matters on the encoder's hot path (several
// messages per kernel dispatch). Arguments follow the arm64 C ABI: NSUInteger
// is uint64, BOOL is bool, pointers are unsafe.Pointer or uintptr (uintptr
// where the address may not be a Go object, so that the GC never sees it).
var (
	msgID       func(id objc.ID, sel objc.SEL) objc.ID
	msgVoid     func(id objc.ID, sel objc.SEL)
	msgU64      func(id objc.ID, sel objc.SEL) uint64
	msgBool     func(id objc.ID, sel objc.SEL) bool
	msgF64      func(id objc.ID, sel objc.SEL) float64
	msgPtr      func(id objc.ID, sel objc.SEL) unsafe.Pointer
	msgStr      func(id objc.ID, sel objc.SEL) string
	msgIDID     func(id objc.ID, sel objc.SEL, a objc.ID) objc.ID
	msgVoidID   func(id objc.ID, sel objc.SEL, a objc.ID)
	msgVoidBool func(id objc.ID, sel objc.SEL, a bool)
	msgIDU64    func(id objc.ID, sel objc.SEL, a uint64) objc.ID
	msgIDU64x2  func(id objc.ID, sel objc.SEL, a, b uint64) objc.ID
	msgVoidU64  func(id objc.ID, sel objc.SEL, a, b uint64)
	// newBufferWithBytes:length:options:, initWithBytes:length:encoding:
	msgIDPtrU64x2 func(id objc.ID, sel objc.SEL, p unsafe.Pointer, a, b uint64) objc.ID
	// newBufferWithBytesNoCopy:length:options:deallocator:
	msgIDAddrU64x2ID func(id objc.ID, sel objc.SEL, p uintptr, a, b uint64, c objc.ID) objc.ID
	// newLibraryWithSource:options:error:
	msgIDIDIDErr func(id objc.ID, sel objc.SEL, a, b objc.ID, err *objc.ID) objc.ID
	// newComputePipelineStateWithFunction:error:
	msgIDIDErr func(id objc.ID, sel objc.SEL, a objc.ID, err *objc.ID) objc.ID
	// setBuffer:offset:atIndex:
	msgVoidIDU64x2 func(id objc.ID, sel objc.SEL, a objc.ID, b, c uint64)
	// setBytes:length:atIndex:
	msgVoidPtrU64x2 func(id objc.ID, sel objc.SEL, p unsafe.Pointer, a, b uint64)
	// dispatchThreadgroups:threadsPerThreadgroup:
	msgVoidSize2 func(id objc.ID, sel objc.SEL, a, b Size)

	createSystemDefaultDevice func() objc.ID
	copyAllDevices            func() objc.ID
	poolPush                  func() uintptr
	poolPop                   func(pool uintptr)
)

var (
	selAlloc          = objc.RegisterName("alloc")
	selInit           = objc.RegisterName("init")
	selRelease        = objc.RegisterName("release")
	selRetain         = objc.RegisterName("retain")
	selInitWithBytes  = objc.RegisterName("initWithBytes:length:encoding:")
	selUTF8String     = objc.RegisterName("UTF8String")
	selLocalizedDesc  = objc.RegisterName("localizedDescription")
	selCount          = objc.RegisterName("count")
	selObjectAtIndex  = objc.RegisterName("objectAtIndex:")
	selName           = objc.RegisterName("name")
	selWorkingSet     = objc.RegisterName("recommendedMaxWorkingSetSize")
	selUnified        = objc.RegisterName("hasUnifiedMemory")
	selMaxBufferLen   = objc.RegisterName("maxBufferLength")
	selMaxTGMemory    = objc.RegisterName("maxThreadgroupMemoryLength")
	selAllocatedSize  = objc.RegisterName("currentAllocatedSize")
	selNewBuffer      = objc.RegisterName("newBufferWithLength:options:")
	selNewBufferBytes = objc.RegisterName("newBufferWithBytes:length:options:")
	selNewBufferNoCpy = objc.RegisterName("newBufferWithBytesNoCopy:length:options:deallocator:")
	selContents       = objc.RegisterName("contents")
	selLength         = objc.RegisterName("length")
	selNewLibrary     = objc.RegisterName("newLibraryWithSource:options:error:")
	selSetFastMath    = objc.RegisterName("setFastMathEnabled:")
	selNewFunction    = objc.RegisterName("newFunctionWithName:")
	selNewPipeline    = objc.RegisterName("newComputePipelineStateWithFunction:error:")
	selMaxThreads     = objc.RegisterName("maxTotalThreadsPerThreadgroup")
	selExecWidth      = objc.RegisterName("threadExecutionWidth")
	selStaticTGMemory = objc.RegisterName("staticThreadgroupMemoryLength")
	selNewQueue       = objc.RegisterName("newCommandQueue")
	selCommandBuffer  = objc.RegisterName("commandBuffer")
	selComputeEncoder = objc.RegisterName("computeCommandEncoder")
	selSetPipeline    = objc.RegisterName("setComputePipelineState:")
	selSetBuffer      = objc.RegisterName("setBuffer:offset:atIndex:")
	selSetBytes       = objc.RegisterName("setBytes:length:atIndex:")
	selSetTGMemory    = objc.RegisterName("setThreadgroupMemoryLength:atIndex:")
	selDispatch       = objc.RegisterName("dispatchThreadgroups:threadsPerThreadgroup:")
	selEndEncoding    = objc.RegisterName("endEncoding")
	selCommit         = objc.RegisterName("commit")
	selWait           = objc.RegisterName("waitUntilCompleted")
	selStatus         = objc.RegisterName("status")
	selError          = objc.RegisterName("error")
	selGPUStart       = objc.RegisterName("GPUStartTime")
	selGPUEnd         = objc.RegisterName("GPUEndTime")
)

const nsUTF8StringEncoding = 4

var (
	loadOnce sync.Once
	loadErr  error
)

// load opens the frameworks and binds the functions above, once.
func load() error {
	loadOnce.Do(func() { loadErr = bind() })
	return loadErr
}

func bind() error {
	const flags = purego.RTLD_NOW | purego.RTLD_GLOBAL
	libobjc, err := purego.Dlopen("/usr/lib/libobjc.A.dylib", flags)
	if err != nil {
		return fmt.Errorf("mtl: loading libobjc: %w", err)
	}
	if _, err := purego.Dlopen("/System/Library/Frameworks/Foundation.framework/Foundation", flags); err != nil {
		return fmt.Errorf("mtl: loading Foundation: %w", err)
	}
	metal, err := purego.Dlopen("/System/Library/Frameworks/Metal.framework/Metal", flags)
	if err != nil {
		return fmt.Errorf("%w: loading Metal.framework: %v", ErrNoDevice, err)
	}
	// Command-line programs that do not link CoreGraphics can get no device
	// from MTLCreateSystemDefaultDevice on Macs with several GPUs; loading
	// it costs nothing where it is not needed.
	purego.Dlopen("/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics", flags)

	send, err := purego.Dlsym(libobjc, "objc_msgSend")
	if err != nil {
		return fmt.Errorf("mtl: %w", err)
	}
	for _, f := range []any{&msgID, &msgVoid, &msgU64, &msgBool, &msgF64, &msgPtr, &msgStr,
		&msgIDID, &msgVoidID, &msgVoidBool, &msgIDU64, &msgIDU64x2, &msgVoidU64, &msgIDPtrU64x2, &msgIDAddrU64x2ID,
		&msgIDIDIDErr, &msgIDIDErr, &msgVoidIDU64x2, &msgVoidPtrU64x2, &msgVoidSize2} {
		purego.RegisterFunc(f, send)
	}
	for _, s := range []struct {
		fn   any
		lib  uintptr
		name string
	}{
		{&createSystemDefaultDevice, metal, "MTLCreateSystemDefaultDevice"},
		{&copyAllDevices, metal, "MTLCopyAllDevices"},
		{&poolPush, libobjc, "objc_autoreleasePoolPush"},
		{&poolPop, libobjc, "objc_autoreleasePoolPop"},
	} {
		sym, err := purego.Dlsym(s.lib, s.name)
		if err != nil {
			return fmt.Errorf("mtl: %s: %w", s.name, err)
		}
		purego.RegisterFunc(s.fn, sym)
	}
	return nil
}

// WithPool runs f inside an autorelease pool, on one OS thread: a pool
// belongs to the thread that pushed it, and the Go scheduler would otherwise
// be free to move the goroutine between the push and the pop. Objects Metal
// hands back autoreleased (command buffers, encoders, strings, errors) are
// freed when the pool pops unless they were retained.
func WithPool(f func() error) error {
	if err := load(); err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p := poolPush()
	defer poolPop(p)
	return f()
}

// nsString returns a new (+1) NSString of s; the caller releases it.
func nsString(s string) (objc.ID, error) {
	b := []byte(s)
	if len(b) == 0 {
		b = []byte{0}
	}
	str := msgIDPtrU64x2(msgID(objc.ID(objc.GetClass("NSString")), selAlloc), selInitWithBytes,
		unsafe.Pointer(&b[0]), uint64(len(s)), nsUTF8StringEncoding)
	runtime.KeepAlive(b)
	if str == 0 {
		return 0, fmt.Errorf("mtl: making an NSString of %d bytes failed", len(s))
	}
	return str, nil
}

// goString copies an NSString (inside a pool: UTF8String's buffer is
// autoreleased).
func goString(str objc.ID) string {
	if str == 0 {
		return ""
	}
	return msgStr(str, selUTF8String)
}

// errorText is an NSError's localizedDescription, or what to say instead.
func errorText(nserr objc.ID) string {
	if nserr == 0 {
		return "no error object"
	}
	return goString(msgID(nserr, selLocalizedDesc))
}

// release sends release to id if it is not nil.
func release(id objc.ID) {
	if id != 0 {
		msgVoid(id, selRelease)
	}
}
