// Package mlmodel writes, reads and evaluates the small CoreML models that the
// coreml device runs: one model per op and shape, as the bytes of a .mlmodel
// file, encoded by hand with protowire (no generated code, no Apple tools).
//
// # Format: ML Program, not NeuralNetwork
//
// A CoreML model is either a NeuralNetwork (a list of layers, CoreML 1–4) or an
// ML Program (a typed MIL program, CoreML 5 and later, specification version
// 6, macOS 12). The models here are ML Programs, for three reasons:
//
//   - Precision is part of the program. Every tensor of an ML Program has a
//     declared type, so a program that casts its f32 inputs to fp16, computes
//     in fp16 and casts back means the same thing on every compute unit. A
//     NeuralNetwork has no types: the Neural Engine runs it in fp16, the GPU in
//     fp16 or f32, the CPU in f32, so its results would depend on where CoreML
//     placed each layer. Here they do not, and Eval can model them exactly.
//   - The ops fit. MIL has linear (x·Wᵀ with W stored [out, in], GGUF's
//     layout, no transpose), silu, rsqrt, reductions and broadcasting
//     element-wise ops; a NeuralNetwork needs more layers and layout tricks
//     for the same programs. ML Program is also the format Apple recommends
//     for new models and the one its Neural Engine work targets.
//   - Weights can be inline. An ML Program's constants are either immediate
//     values inside the protobuf or offsets into a weights blob of an
//     .mlpackage directory. This package writes only immediate values (fp16
//     tensors as raw little-endian bytes, as coremltools does for fp16), so a
//     model is one self-contained .mlmodel file that +[MLModel
//     compileModelAtURL:error:] compiles without a package manifest. (Apple's
//     coremltools compiles specs through the same bare-file path and documents
//     only blob-file ML Programs as unsupported there; this is compiled,
//     unverified on a Mac here.)
//
// The cost of the choice is macOS 12 as the oldest system, and protobufs as
// large as their fp16 weights (CoreML reads NeuralNetwork files of hundreds of
// megabytes with inline weights, the same encoding size).
//
// # What a model computes
//
// The programs (MatMul, RMSNorm, AddBias, SiLUMul, Add) take f32 multi-arrays named
// "in0", "in1" and return one f32 multi-array named "out", so that the device
// can wrap its f32 buffers without copying. Inside, each input is cast to fp16
// and every op computes and stores fp16, as the Neural Engine does. RMSNorm is
// written to stay inside fp16's range (see RMSNorm).
//
// # Checking models without a Mac
//
// Unmarshal parses the bytes back (strictly: any field it did not write is an
// error), Validate checks the program's types and shapes, and Eval interprets
// exactly the ops these programs use, rounding every op's result to fp16. The
// tests decode every program with protoc against testdata/coreml_subset.proto
// (this project's own schema of only the fields written here, with
// coremltools' field numbers) and compare Eval with the CPU device.
package mlmodel
