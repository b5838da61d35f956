// measure.cuh: what the measuring programs of this folder (roofline.cu,
// boundary.cu) share: a CUDA call checked, and the median of timings.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

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
