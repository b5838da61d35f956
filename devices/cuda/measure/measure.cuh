// measure.cuh: what the measuring programs of this folder (roofline.cu,
// boundary.cu, tail.cu, oattn.cu) share: a CUDA call checked, the median of
// timings, work on a stream timed by events, and a chain of activations.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#define CK(x)                                                                                          \
	do {                                                                                               \
		cudaError_t e_ = (x);                                                                          \
		if (e_ != cudaSuccess) {                                                                       \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));       \
			exit(1);                                                                                   \
		}                                                                                              \
	} while (0)

static double median(std::vector<double> v) {
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

// timed runs f (work queued on s; 0: the default stream) reps times after
// two warm-ups and returns the median ms of one.
template <class F> static double timed(cudaStream_t s, F f, int reps = 7) {
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	std::vector<double> ms;
	for (int r = 0; r < reps + 2; r++) {
		CK(cudaEventRecord(a, s));
		f();
		CK(cudaEventRecord(b, s));
		CK(cudaEventSynchronize(b));
		float t;
		CK(cudaEventElapsedTime(&t, a, b));
		if (r >= 2) ms.push_back(t);
	}
	CK(cudaGetLastError());
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
	return median(ms);
}

// Chain is the activations of a chain of phases of n floats each: phase i
// reads in(i) (x0 for i = 0, which reset fills with the same values every
// run; then the phase before's output) and writes out(i), o0 and o1 in turn.
struct Chain {
	int n;
	float *x0, *o0, *o1;
	std::vector<float> hx;
	explicit Chain(int n_) : n(n_), hx(n_) {
		CK(cudaMalloc(&x0, n * 4));
		CK(cudaMalloc(&o0, n * 4));
		CK(cudaMalloc(&o1, n * 4));
		for (int i = 0; i < n; i++) hx[i] = (float)((i * 37) % 101 - 50) / 50.0f;
	}
	float *in(int i) const { return i == 0 ? x0 : i % 2 ? o0 : o1; }
	float *out(int i) const { return i % 2 ? o1 : o0; }
	void reset(cudaStream_t s) const { CK(cudaMemcpyAsync(x0, hx.data(), n * 4, cudaMemcpyHostToDevice, s)); }
};

// graphOf captures n launches in a CUDA graph and instantiates it:
// launch(i, cfg) queues the i-th with cfg, a config of grid blocks of
// threads and shmem bytes of dynamic shared memory on s, with programmatic
// stream serialization (a programmatic dependent launch) where pdl is set
// and clusters of cluster blocks where it is above 1.
template <class F> static cudaGraphExec_t graphOf(cudaStream_t s, int n, int grid, int threads, size_t shmem, bool pdl, int cluster, F launch) {
	cudaGraph_t g;
	cudaGraphExec_t ge;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	for (int i = 0; i < n; i++) {
		cudaLaunchConfig_t cfg = {};
		cfg.gridDim = dim3(grid), cfg.blockDim = dim3(threads), cfg.stream = s, cfg.dynamicSmemBytes = shmem;
		cudaLaunchAttribute at[2];
		int na = 0;
		if (pdl) at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization, at[na++].val.programmaticStreamSerializationAllowed = 1;
		if (cluster > 1) {
			at[na].id = cudaLaunchAttributeClusterDimension;
			at[na].val.clusterDim.x = cluster, at[na].val.clusterDim.y = 1, at[na++].val.clusterDim.z = 1;
		}
		cfg.attrs = at, cfg.numAttrs = na;
		launch(i, cfg);
	}
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphInstantiateWithFlags(&ge, g, 0));
	CK(cudaGraphDestroy(g));
	return ge;
}

// chainRun times graph ge (a chain whose first input is x, n floats, reset
// to hx before each run) and returns the median ms of a run, with the last
// run's n floats at out in y.
static double chainRun(cudaStream_t s, cudaGraphExec_t ge, float *x, const std::vector<float> &hx, const float *out, int n, std::vector<float> &y) {
	double t = timed(s, [&] {
		CK(cudaMemcpyAsync(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice, s));
		CK(cudaGraphLaunch(ge, s));
	});
	y.resize(n);
	CK(cudaMemcpy(y.data(), out, (size_t)n * 4, cudaMemcpyDeviceToHost));
	return t;
}
