// Package kernels holds the CPU device's compute kernels: quantized weight
// matrix times f32 activation vector (MatVec) or matrix (MatMul), and the f32
// vector primitives attention needs (Dot, Axpy), spread over a fixed Pool of
// worker goroutines.
//
// Weights are used in place, in their GGUF encoding. For the block-quantized
// types the activations are first quantized to 8-bit blocks, as llama.cpp does
// (Q8_0-style blocks of 32 for Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 weights,
// Q8_K-style blocks of 256 with per-16 sums for the K-quants), so that the inner
// loops are integer dot products. On amd64 with AVX2, FMA and F16C those loops
// are assembly; everywhere else, and under the purego build tag, portable Go
// computes the same integer sums.
//
// At batch 1 a mat-vec reads every weight byte once and does a few integer
// operations per byte, so a fast enough kernel is bound by memory bandwidth;
// the kernels' comments say which bound each one meets.
package kernels
