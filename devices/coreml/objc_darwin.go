//go:build darwin

package coreml

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"

	"hybrid/devices/coreml/mlmodel"
)

// The Objective-C side: CoreML.framework and the Foundation classes it
// takes, through purego's objc runtime (no cgo). Every function here that
// makes Objective-C objects runs inside its own autorelease pool on a locked
// OS thread (withPool), and retains what it returns beyond it.

var (
	loadOnce sync.Once
	loadErr  error

	poolPush func() uintptr
	poolPop  func(uintptr)

	cls struct {
		MLModel, MLModelConfiguration, MLMultiArray, MLDictionaryFeatureProvider objc.Class
		NSString, NSURL, NSNumber, NSMutableArray, NSMutableDictionary           objc.Class
	}
	sel struct {
		alloc, new, retain, release, count, objectAtIndex, respondsToSelector    objc.SEL
		stringWithUTF8String, utf8String, fileURLWithPath, path                  objc.SEL
		numberWithLongLong, longLongValue, arrayWithCapacity, addObject          objc.SEL
		dictionary, setObjectForKey, localizedDescription                        objc.SEL
		compileModel, modelWithContents, setComputeUnits                         objc.SEL
		initWithDataPointer, initWithDictionary, prediction, featureValueForName objc.SEL
		multiArrayValue, dataType, shape, strides, getBytesWithHandler           objc.SEL
		dataPointer                                                              objc.SEL
	}
)

// load opens CoreML.framework and looks up the classes and selectors used,
// once; the error says which one is missing.
func load() error {
	loadOnce.Do(func() { loadErr = loadFrameworks() })
	return loadErr
}

func loadFrameworks() error {
	for _, lib := range []string{
		"/System/Library/Frameworks/Foundation.framework/Foundation",
		"/System/Library/Frameworks/CoreML.framework/CoreML",
	} {
		if _, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
			return fmt.Errorf("coreml: open %s: %w", lib, err)
		}
	}
	libobjc, err := purego.Dlopen("/usr/lib/libobjc.A.dylib", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("coreml: open libobjc: %w", err)
	}
	for name, fn := range map[string]any{"objc_autoreleasePoolPush": &poolPush, "objc_autoreleasePoolPop": &poolPop} {
		sym, err := purego.Dlsym(libobjc, name)
		if err != nil {
			return fmt.Errorf("coreml: %s: %w", name, err)
		}
		purego.RegisterFunc(fn, sym)
	}
	for name, c := range map[string]*objc.Class{
		"MLModel": &cls.MLModel, "MLModelConfiguration": &cls.MLModelConfiguration,
		"MLMultiArray": &cls.MLMultiArray, "MLDictionaryFeatureProvider": &cls.MLDictionaryFeatureProvider,
		"NSString": &cls.NSString, "NSURL": &cls.NSURL, "NSNumber": &cls.NSNumber,
		"NSMutableArray": &cls.NSMutableArray, "NSMutableDictionary": &cls.NSMutableDictionary,
	} {
		if *c = objc.GetClass(name); *c == 0 {
			return fmt.Errorf("coreml: class %s not found in CoreML.framework or Foundation", name)
		}
	}
	for name, s := range map[string]*objc.SEL{
		"alloc": &sel.alloc, "new": &sel.new, "retain": &sel.retain, "release": &sel.release,
		"count": &sel.count, "objectAtIndex:": &sel.objectAtIndex, "respondsToSelector:": &sel.respondsToSelector,
		"stringWithUTF8String:": &sel.stringWithUTF8String, "UTF8String": &sel.utf8String,
		"fileURLWithPath:": &sel.fileURLWithPath, "path": &sel.path,
		"numberWithLongLong:": &sel.numberWithLongLong, "longLongValue": &sel.longLongValue,
		"arrayWithCapacity:": &sel.arrayWithCapacity, "addObject:": &sel.addObject,
		"dictionary": &sel.dictionary, "setObject:forKey:": &sel.setObjectForKey,
		"localizedDescription":                                          &sel.localizedDescription,
		"compileModelAtURL:error:":                                      &sel.compileModel,
		"modelWithContentsOfURL:configuration:error:":                   &sel.modelWithContents,
		"setComputeUnits:":                                              &sel.setComputeUnits,
		"initWithDataPointer:shape:dataType:strides:deallocator:error:": &sel.initWithDataPointer,
		"initWithDictionary:error:":                                     &sel.initWithDictionary,
		"predictionFromFeatures:error:":                                 &sel.prediction,
		"featureValueForName:":                                          &sel.featureValueForName,
		"multiArrayValue":                                               &sel.multiArrayValue,
		"dataType":                                                      &sel.dataType,
		"shape":                                                         &sel.shape,
		"strides":                                                       &sel.strides,
		"getBytesWithHandler:":                                          &sel.getBytesWithHandler,
		"dataPointer":                                                   &sel.dataPointer,
	} {
		*s = objc.RegisterName(name)
	}
	return nil
}

// withPool runs fn on a locked OS thread inside an autorelease pool, which
// frees the autoreleased objects fn makes when it returns.
func withPool(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p := poolPush()
	defer poolPop(p)
	return fn()
}

// nsString returns an autoreleased NSString of s.
func nsString(s string) objc.ID {
	b := append([]byte(s), 0)
	id := objc.ID(cls.NSString).Send(sel.stringWithUTF8String, unsafe.Pointer(&b[0]))
	runtime.KeepAlive(b)
	return id
}

// goString copies an NSString into Go.
func goString(s objc.ID) string {
	if s == 0 {
		return ""
	}
	p := objc.Send[*byte](s, sel.utf8String)
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// fileURL returns an autoreleased file NSURL of path.
func fileURL(path string) objc.ID {
	return objc.ID(cls.NSURL).Send(sel.fileURLWithPath, nsString(path))
}

// nsError turns an NSError out-parameter into a Go error carrying its
// localizedDescription.
func nsError(what string, e objc.ID) error {
	if e == 0 {
		return fmt.Errorf("coreml: %s failed (no NSError)", what)
	}
	return fmt.Errorf("coreml: %s: %s", what, goString(e.Send(sel.localizedDescription)))
}

// nsNumbers returns an autoreleased NSArray of NSNumbers.
func nsNumbers(v []int) objc.ID {
	a := objc.ID(cls.NSMutableArray).Send(sel.arrayWithCapacity, uint(len(v)))
	for _, x := range v {
		a.Send(sel.addObject, objc.ID(cls.NSNumber).Send(sel.numberWithLongLong, int64(x)))
	}
	return a
}

// goInts reads an NSArray of NSNumbers.
func goInts(a objc.ID) []int {
	n := objc.Send[uint](a, sel.count)
	v := make([]int, n)
	for i := range v {
		v[i] = int(objc.Send[int64](a.Send(sel.objectAtIndex, uint(i)), sel.longLongValue))
	}
	return v
}

// compileModel compiles the .mlmodel file at src with +[MLModel
// compileModelAtURL:error:] and returns the path of the compiled .mlmodelc
// directory, which CoreML leaves in a temporary directory.
func compileModel(src string) (string, error) {
	var out string
	err := withPool(func() error {
		var nserr objc.ID
		url := objc.ID(cls.MLModel).Send(sel.compileModel, fileURL(src), unsafe.Pointer(&nserr))
		if url == 0 {
			return nsError("compileModelAtURL "+src, nserr)
		}
		out = goString(url.Send(sel.path))
		return nil
	})
	return out, err
}

// model is a loaded, compiled CoreML model (retained).
type model struct{ id objc.ID }

// loadModel loads the compiled model at path with +[MLModel
// modelWithContentsOfURL:configuration:error:] on the given compute units.
func loadModel(path string, units ComputeUnits) (*model, error) {
	m := &model{}
	err := withPool(func() error {
		cfg := objc.ID(cls.MLModelConfiguration).Send(sel.new)
		defer cfg.Send(sel.release)
		cfg.Send(sel.setComputeUnits, int(units))
		var nserr objc.ID
		id := objc.ID(cls.MLModel).Send(sel.modelWithContents, fileURL(path), cfg, unsafe.Pointer(&nserr))
		if id == 0 {
			return nsError("load "+path, nserr)
		}
		m.id = id.Send(sel.retain)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (m *model) release() {
	if m.id != 0 {
		withPool(func() error { m.id.Send(sel.release); return nil })
		m.id = 0
	}
}

// predict runs the model on inputs, each a rows×cols f32 matrix in memory
// outside the Go heap, which MLMultiArrays wrap without copying, and copies
// the output into out (whatever its type and strides).
func (m *model) predict(inputs [][]float32, rows, cols int, out []float32) error {
	return withPool(func() error {
		dict := objc.ID(cls.NSMutableDictionary).Send(sel.dictionary)
		for i, x := range inputs {
			if len(x) != rows*cols {
				return fmt.Errorf("coreml: input %d has %d values for [%d,%d]", i, len(x), rows, cols)
			}
			var nserr objc.ID
			arr := objc.ID(cls.MLMultiArray).Send(sel.alloc).Send(sel.initWithDataPointer,
				unsafe.Pointer(&x[0]), nsNumbers([]int{rows, cols}), arrayFloat32,
				nsNumbers([]int{cols, 1}), uintptr(0), unsafe.Pointer(&nserr))
			if arr == 0 {
				return nsError("MLMultiArray of input "+mlmodel.Input(i), nserr)
			}
			dict.Send(sel.setObjectForKey, arr, nsString(mlmodel.Input(i)))
			arr.Send(sel.release) // the dictionary holds it
		}
		var nserr objc.ID
		prov := objc.ID(cls.MLDictionaryFeatureProvider).Send(sel.alloc).Send(sel.initWithDictionary, dict, unsafe.Pointer(&nserr))
		if prov == 0 {
			return nsError("MLDictionaryFeatureProvider", nserr)
		}
		defer prov.Send(sel.release)
		res := m.id.Send(sel.prediction, prov, unsafe.Pointer(&nserr))
		if res == 0 {
			return nsError("predictionFromFeatures", nserr)
		}
		fv := res.Send(sel.featureValueForName, nsString(mlmodel.OutputName))
		arr := objc.ID(0)
		if fv != 0 {
			arr = fv.Send(sel.multiArrayValue)
		}
		if arr == 0 {
			return fmt.Errorf("coreml: prediction has no multi-array %q", mlmodel.OutputName)
		}
		return readOutput(arr, out)
	})
}

// readOutput copies the MLMultiArray arr into out, through
// getBytesWithHandler: where the system has it (macOS 12.3; it also reads
// arrays backed by the Neural Engine's surfaces) and dataPointer before.
func readOutput(arr objc.ID, out []float32) error {
	dtype := objc.Send[int](arr, sel.dataType)
	shape, strides := goInts(arr.Send(sel.shape)), goInts(arr.Send(sel.strides))
	size := elemSize(dtype)
	ext, err := arrayExtent(shape, strides)
	if err != nil {
		return err
	}
	if size == 0 {
		return fmt.Errorf("coreml: output array of data type %#x, want fp16, f32 or f64", dtype)
	}
	if objc.Send[bool](arr, sel.respondsToSelector, sel.getBytesWithHandler) {
		rerr := fmt.Errorf("coreml: getBytesWithHandler did not call its handler")
		blk := objc.NewBlock(func(_ objc.Block, bytes unsafe.Pointer, n int) {
			rerr = readArray(out, unsafe.Slice((*byte)(bytes), n), dtype, shape, strides)
		})
		defer blk.Release()
		arr.Send(sel.getBytesWithHandler, blk)
		return rerr
	}
	p := objc.Send[unsafe.Pointer](arr, sel.dataPointer)
	if p == nil {
		return fmt.Errorf("coreml: output array has no data")
	}
	return readArray(out, unsafe.Slice((*byte)(p), ext*size), dtype, shape, strides)
}
