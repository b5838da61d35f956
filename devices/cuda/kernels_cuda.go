//go:build cuda

package cuda

import (
	_ "embed"
	"fmt"
	"os"
	"strings"

	"hybrid/quant"
)

// The kernels are CUDA C compiled to PTX for compute_80 (Ampere and later);
// the driver JIT-compiles it for the GPU it finds at load. Regenerate with
// `go generate -tags cuda ./devices/cuda/` (nvcc from ../shared/tools/cuda-dev-setup.sh).
//
//go:generate nvcc -ptx -arch=compute_80 -O3 -o kernels/matmul.ptx kernels/matmul.cu
//go:generate nvcc -ptx -arch=compute_80 -O3 -o kernels/ops.ptx kernels/ops.cu
//go:generate nvcc -ptx -arch=compute_80 -O3 -o kernels/attention.ptx kernels/attention.cu
//go:generate nvcc -ptx -arch=compute_80 -O3 -o kernels/fused.ptx kernels/fused.cu
//go:generate nvcc -ptx -arch=compute_80 -O3 -o kernels/mmq.ptx kernels/mmq.cu
//
// The fused decode mat-vecs and the decode attention are also built for
// compute_90 (Hopper and later), where they are programmatic dependent
// launches (griddepcontrol; pdl in launch_cuda.go):
//
//go:generate nvcc -ptx -arch=compute_90 -O3 -o kernels/fused90.ptx kernels/fused.cu
//go:generate nvcc -ptx -arch=compute_90 -O3 -o kernels/attention90.ptx kernels/attention.cu

var (
	//go:embed kernels/matmul.ptx
	matmulPTX string
	//go:embed kernels/ops.ptx
	opsPTX string
	//go:embed kernels/attention.ptx
	attentionPTX string
	//go:embed kernels/fused.ptx
	fusedPTX string
	//go:embed kernels/mmq.ptx
	mmqPTX string
	//go:embed kernels/fused90.ptx
	fused90PTX string
	//go:embed kernels/attention90.ptx
	attention90PTX string
)

// noPDL is HYBRID_CUDA_PDL=0: the compute_80 modules and plain launches on
// Hopper too, to measure the two.
var noPDL = os.Getenv("HYBRID_CUDA_PDL") == "0"

// mmqTypes are the weight types with an 8-bit tensor-core prefill mat-mul
// (MQ_TYPES in kernels/mmq.cu); the others run mmt on f16. Not Q4_0, Q8_0
// and Q6_K, whose rows the device regroups (layout.go).
var mmqTypes = map[quant.Type]bool{
	quant.Q4_1: true, quant.Q5_0: true, quant.Q5_1: true,
	quant.Q4_K: true, quant.Q5_K: true, quant.IQ4_NL: true,
}

// typeNames are the weight types the kernels are instantiated for
// (FOR_TYPES in kernels/quant.cuh), by the suffix of their kernel names.
var typeNames = map[quant.Type]string{
	quant.F32: "f32", quant.F16: "f16", quant.BF16: "bf16",
	quant.Q4_0: "q4_0", quant.Q4_1: "q4_1", quant.Q5_0: "q5_0", quant.Q5_1: "q5_1",
	quant.Q8_0: "q8_0", quant.Q4_K: "q4_k", quant.Q5_K: "q5_k", quant.Q6_K: "q6_k",
	quant.Q2_K: "q2_k", quant.Q3_K: "q3_k", quant.IQ4_NL: "iq4_nl", quant.IQ4_XS: "iq4_xs",
}

// chunk is the elements a matrix row must hold a whole number of: the
// kernels read activations in 16-byte vectors (block types have 32 or 256
// elements anyway); float rows may end in a part of a piece of 8.
func chunk(t quant.Type) int {
	switch t {
	case quant.F32, quant.F16, quant.BF16:
		return 4
	}
	return 32
}

// typed holds a weight type's kernels.
type typed struct {
	matvec, matmul8, embed kernel
	mmt, mmt64, mmt32      kernel // tensor-core prefill mat-mul, 128-, 64- and 32-token tiles (kernels/matmul.cu)
	deq16                  kernel // the weight decoded to f16 for cuBLAS (blas_cuda.go)
	mmt4w                  kernel // Q4_0's 128-token tiles, with four warps (mmt4w_q4_0); zero for the other types
	mmq, mmq64, mmq32      kernel // the same on 8-bit inputs (kernels/mmq.cu), for mmqTypes only; zero for the others
	mv                     kernel // fused decode mat-vec (kernels/fused.cu)
	mvw                    kernel // the same with more warps a block (its threads), for mvwTypes only
	mvw2                   kernel // mvw held to two blocks a multiprocessor, Q6_K only (launchMV)
	mvp                    kernel // mvw with each warp's first row loaded before the wait, Q4_0, Q8_0, Q4_K and Q6_K only (launchMV)
	mvsp                   kernel // mvw for MV_SILU alone, each warp's first gate and up rows' first trip loaded before the wait, Q4_0 only (launchMV)
	mvwq                   kernel // MV_SILU by whole groups of 32 rows, writing the down projection's input staged (QG; mvwq_q4_0, mvwq_q8_0: launchMV, q8Pair)
	mvrp                   kernel // mvw for MV_ROPE alone with each warp's first pair's first trips loaded before the wait, Q8_0 only (Q4_K's are in mvRope)
	mvb, xq                kernel // mat-vecs of several rows on 8-bit activations, and their quantization (kernels/fused.cu)
	mvt, mvt2              kernel // mvb on 8-bit tensor cores for up to 16 and 32 rows (kernels/fused.cu), for mvtTypes only
	mvtw, mvtw2            kernel // the same with eight warps a block (mvtWarps)
	mvtx, mvtx2            kernel // and sixteen, for Q4_0 and Q8_0 only
}

// kernels are one context's loaded functions, looked up once.
type kernels struct {
	mods                        []module
	byType                      map[quant.Type]*typed
	rmsNorm, rope, siluMul, add kernel
	addBias                     kernel
	attention, kvAppend         kernel
	argmax                      kernel // the greedy pick of a row of logits (ReadArgmax)
	argmaxNext                  kernel // argmax's pick kept as the next step's token and position (PickNext)
	topk                        kernel // the largest logits of a row (ReadTopK)
	sampleNext                  kernel // a sampler's pick kept as the next step's token and position (SampleNext)
	attentionT2, attentionT4    kernel // attention for head sizes up to 64 and 128 (kernels/attention.cu)
	fattnD64, fattnD128         kernel // a prompt's attention on tensor cores for head sizes 64 and 128
	// attentionG is a few rows' attention by key-value head (attention_g*
	// in kernels/attention.cu): [head size 64, 128][up to 1, 2, 4, 8 query
	// heads a block].
	attentionG [2][4]kernel
	mvRope     map[[2]quant.Type][3]kernel // mvr_ and mvrw_ of ropeKernels' pairs: MV_ROPE alone (v of another type, or q and k two rows at once), on 8 and 16 warps; and mvrp_, Q4_K's alone, with loads ahead
	ropeKV     kernel                      // fused decode RoPE and cache append
	mmtSum     kernel                      // the sum of a split-K prefill mat-mul's slices (kernels/matmul.cu)
	toF16      kernel                      // a prefill mat-mul's activations rounded to f16 (kernels/matmul.cu)
	mmqQuant   kernel                      // a prefill mat-mul's activations quantized to 8 bits (kernels/mmq.cu)
	// pdl: the fused and attention modules are the compute_90 builds, whose
	// decode mat-vecs launchMV launches as programmatic dependent launches.
	pdl bool
}

// loadKernels loads the embedded modules into the current context, for a
// GPU whose compute capability's major number is major: the compute_90
// builds of the fused and attention modules from 9 (Hopper) on, unless noPDL.
func loadKernels(major int) (*kernels, error) {
	k := &kernels{byType: map[quant.Type]*typed{}, mvRope: map[[2]quant.Type][3]kernel{}, pdl: major >= 9 && !noPDL}
	load := func(ptx string) (module, error) {
		m, err := loadModule(ptx)
		if err != nil {
			return m, fmt.Errorf("loading PTX: %w", err)
		}
		k.mods = append(k.mods, m)
		return m, nil
	}
	get := func(m module, name string) (kernel, error) {
		f, err := m.function(name)
		if err != nil {
			return kernel{}, err
		}
		return kernel{name: name, fn: f}, nil
	}
	// wideMV is a decode mat-vec of more than eight warps a block
	// (mvw_ and mvrw_ in kernels/fused.cu): its launches take the block
	// size it was built for (MVW_THREADS_<type>).
	wideMV := func(m module, name string) (kernel, error) {
		k, err := get(m, name)
		if err != nil {
			return k, err
		}
		if k.threads, err = maxThreads(k); err != nil {
			return k, err
		}
		if k.threads < 256 || k.threads%32 != 0 {
			return k, fmt.Errorf("%s: built for blocks of %d threads, not a whole number of warps past eight", name, k.threads)
		}
		return k, nil
	}
	mm, err := load(matmulPTX)
	if err != nil {
		return nil, err
	}
	// variant is a module's PTX: the embedded one, or for an A/B run with
	// one binary (bench/cuda/*-ab.sh) the file env names, the same kernels
	// built with other macros.
	variant := func(env, embedded string) (string, error) {
		f := os.Getenv(env)
		if f == "" {
			return embedded, nil
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("%s: %w", env, err)
		}
		return string(b), nil
	}
	attn, fused := attentionPTX, fusedPTX
	if k.pdl {
		attn, fused = attention90PTX, fused90PTX
	}
	var texts [3]string
	for i, v := range []struct{ env, embedded string }{{"HYBRID_CUDA_OPS_PTX", opsPTX}, {"HYBRID_CUDA_ATTENTION_PTX", attn}, {"HYBRID_CUDA_FUSED_PTX", fused}} {
		if texts[i], err = variant(v.env, v.embedded); err != nil {
			return nil, err
		}
	}
	// A programmatic dependent launch may start before the launch ahead of
	// it ends: only mat-vecs that wait for it (a compute_90 build) are
	// launched so, whatever PTX HYBRID_CUDA_FUSED_PTX names.
	k.pdl = k.pdl && strings.Contains(texts[2], "griddepcontrol.wait")
	om, err := load(texts[0])
	if err != nil {
		return nil, err
	}
	am, err := load(texts[1])
	if err != nil {
		return nil, err
	}
	fm, err := load(texts[2])
	if err != nil {
		return nil, err
	}
	qm, err := load(mmqPTX)
	if err != nil {
		return nil, err
	}
	for t, n := range typeNames {
		var tk typed
		if tk.matvec, err = get(mm, "matvec_"+n); err != nil {
			return nil, err
		}
		if tk.matmul8, err = get(mm, "matmul8_"+n); err != nil {
			return nil, err
		}
		if tk.mmt, err = get(mm, "mmt_"+n); err != nil {
			return nil, err
		}
		if tk.mmt64, err = get(mm, "mmt64_"+n); err != nil {
			return nil, err
		}
		if tk.mmt32, err = get(mm, "mmt32_"+n); err != nil {
			return nil, err
		}
		if tk.deq16, err = get(mm, "deq16_"+n); err != nil {
			return nil, err
		}
		if tk.embed, err = get(om, "embed_"+n); err != nil {
			return nil, err
		}
		if tk.mv, err = get(fm, "mv_"+n); err != nil {
			return nil, err
		}
		if mvwTypes[t] {
			if tk.mvw, err = wideMV(fm, "mvw_"+n); err != nil {
				return nil, err
			}
		}
		if t == quant.Q6_K {
			if tk.mvw2, err = wideMV(fm, "mvw2_"+n); err != nil {
				return nil, err
			}
		}
		if t == quant.Q4_0 || t == quant.Q8_0 || t == quant.Q4_K || t == quant.Q6_K {
			if tk.mvp, err = wideMV(fm, "mvp_"+n); err != nil {
				return nil, err
			}
		}
		if t == quant.Q4_0 {
			if tk.mvsp, err = wideMV(fm, "mvsp_"+n); err != nil {
				return nil, err
			}
		}
		if t == quant.Q8_0 {
			if tk.mvrp, err = wideMV(fm, "mvrp_q8_0_q8_0"); err != nil {
				return nil, err
			}
		}
		if name, ok := map[quant.Type]string{quant.Q4_0: "mvwq_q4_0", quant.Q8_0: "mvwq_q8_0"}[t]; ok {
			if tk.mvwq, err = wideMV(fm, name); err != nil {
				return nil, err
			}
		}
		if tk.mvb, err = get(fm, "mvb_"+n); err != nil {
			return nil, err
		}
		if tk.xq, err = get(fm, "xq_"+n); err != nil {
			return nil, err
		}
		if err := allowShared(tk.mvb, mvbShared); err != nil {
			return nil, err
		}
		if mvtTypes[t] > 0 {
			for _, p := range []struct {
				k    *kernel
				name string
			}{{&tk.mvt, "mvt_"}, {&tk.mvt2, "mvt2_"}, {&tk.mvtw, "mvtw_"}, {&tk.mvtw2, "mvtw2_"}, {&tk.mvtx, "mvtx_"}, {&tk.mvtx2, "mvtx2_"}} {
				if (p.name == "mvtx_" || p.name == "mvtx2_") && t != quant.Q4_0 && t != quant.Q8_0 {
					continue // 16 warps need 16 lane groups
				}
				if *p.k, err = get(fm, p.name+n); err != nil {
					return nil, err
				}
			}
		}
		for _, m := range []kernel{tk.mmt, tk.mmt64, tk.mmt32} {
			if err := allowShared(m, mmtSharedMax); err != nil {
				return nil, err
			}
		}
		if t == quant.Q4_0 {
			if tk.mmt4w, err = get(mm, "mmt4w_q4_0"); err != nil {
				return nil, err
			}
			if err := allowShared(tk.mmt4w, mmtSharedMax); err != nil {
				return nil, err
			}
		}
		if mmqTypes[t] {
			for _, p := range []struct {
				k    *kernel
				name string
			}{{&tk.mmq, "mmq_"}, {&tk.mmq64, "mmq64_"}, {&tk.mmq32, "mmq32_"}} {
				if *p.k, err = get(qm, p.name+n); err != nil {
					return nil, err
				}
				if err := allowShared(*p.k, mmtSharedMax); err != nil {
					return nil, err
				}
			}
		}
		k.byType[t] = &tk
	}
	for _, p := range []struct {
		k    *kernel
		m    module
		name string
	}{{&k.rmsNorm, om, "rms_norm"}, {&k.rope, om, "rope"}, {&k.siluMul, om, "silu_mul"}, {&k.add, om, "add"}, {&k.addBias, om, "add_bias"}, {&k.attention, am, "attention"}, {&k.attentionT2, am, "attention_t2"}, {&k.attentionT4, am, "attention_t4"}, {&k.fattnD64, am, "fattn_d64"}, {&k.fattnD128, am, "fattn_d128"}, {&k.kvAppend, om, "kv_append"}, {&k.argmax, om, "argmax"}, {&k.argmaxNext, om, "argmax_next"}, {&k.topk, om, "topk"}, {&k.sampleNext, om, "sample_next"}, {&k.ropeKV, fm, "rope_kv"}, {&k.mmtSum, mm, "mmt_sum"}, {&k.toF16, mm, "to_f16"}, {&k.mmqQuant, qm, "mmq_quant"}} {
		if *p.k, err = get(p.m, p.name); err != nil {
			return nil, err
		}
	}
	for _, p := range ropeKernels {
		n := typeNames[p[0]] + "_" + typeNames[p[1]]
		var ks [3]kernel
		if ks[0], err = get(fm, "mvr_"+n); err != nil {
			return nil, err
		}
		if ks[1], err = wideMV(fm, "mvrw_"+n); err != nil {
			return nil, err
		}
		if p == [2]quant.Type{quant.Q4_K, quant.Q4_K} {
			if ks[2], err = wideMV(fm, "mvrp_"+n); err != nil {
				return nil, err
			}
		}
		k.mvRope[p] = ks
	}
	for d, hd := range []int{64, 128} {
		for g := range k.attentionG[d] {
			if k.attentionG[d][g], err = get(am, fmt.Sprintf("attention_g%d_%d", hd, 1<<g)); err != nil {
				return nil, err
			}
		}
	}
	return k, nil
}

func (k *kernels) unload() {
	for _, m := range k.mods {
		m.unload()
	}
	k.mods = nil
}
