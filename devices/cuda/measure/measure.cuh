// measure.cuh: what the measuring programs of this folder (roofline.cu,
// boundary.cu, tail.cu) share: a CUDA call checked, the median of timings,
// and work on a stream timed by events.
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
