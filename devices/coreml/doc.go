// Package coreml is the Apple Neural Engine device: each op it runs is a small
// ML Program (package mlmodel) that CoreML compiles once and runs with
// MLComputeUnitsCPUAndNeuralEngine by default, computing in fp16.
//
// # Ops
//
// MatMul (any weight type the CPU device supports, dequantized at load and
// rounded to fp16), RMSNorm (per head too: the whole-row norm's model over
// tokens × heads rows of one head), AddBias (a one-row bias broadcast over
// the rows), SiLUMul and Add. The others are refused by Supports, each for
// its reason:
//
//   - Embed reads rows of the embedding table by token id: a gather, not
//     arithmetic. The ids are step data, not an f32 input, the table is the
//     largest tensor of the model, and the CPU copies a row faster than CoreML
//     can be called.
//   - RoPE (every variant: adjacent or NEOX pairs, with or without
//     frequency factors) rotates by angles that depend on the step's
//     position, so one compiled model would serve one position only (or
//     need the angle tables as inputs, computed on the host anyway), and
//     fp16 angles lose the precision large positions need.
//   - Attention appends to a KV cache that must persist and grow across
//     calls; a CoreML model is a pure function of its inputs (ML Program
//     states need macOS 15 and are not used here).
//   - LastRow is a copy of one row: nothing to compute.
//
// # Models and the cache
//
// A model is made for one op and one shape: a new number of rows (a prefill
// of another length) is a new model. Compiled models are kept in
// os.UserCacheDir()/hybrid/coreml/<key>.mlmodelc, keyed by op kind, shape,
// epsilon and a SHA-256 of the weight's bytes, so a second run loads them
// without compiling. Left out: runs of ops fused into one model (the device
// interface hands over one op at a time), flexible shapes (one model for every
// row count) and output backings (the output is copied out of CoreML's array).
//
// # Options
//
// $HYBRID_COREML_UNITS picks MLModelConfiguration.computeUnits: "cpu_ne"
// (MLComputeUnitsCPUAndNeuralEngine = 3, the default; macOS 13), "all" (2:
// CPU, GPU and Neural Engine), "cpu_gpu" (1) or "cpu" (0). CoreML places
// each op of a model on the allowed unit it prefers and falls back to the CPU
// for what the others cannot run; the program's fp16 types hold everywhere.
// $HYBRID_COREML_CACHE moves the cache directory.
//
// # Status
//
// The model writer, the cache and the output reading are tested on Linux; the
// models' meaning is checked against the CPU device by mlmodel.Eval. The
// darwin device itself, which loads CoreML.framework through purego, is
// compiled, unverified on a Mac. On other systems the backend registers to
// say why there is no CoreML device.
package coreml
