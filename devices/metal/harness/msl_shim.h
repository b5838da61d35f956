// msl_shim.h: enough of the Metal Shading Language, as C++17 for g++, to
// compile hybrid's kernels (devices/metal/kernels) unchanged and run them on
// the CPU, so that the dispatch plan the Mac uses is tested on Linux.
//
// What it maps:
//   - Address spaces (device, constant, thread, threadgroup) and `kernel` are
//     empty macros; attributes such as [[buffer(0)]] are unknown attributes,
//     which g++ ignores (-Wno-attributes). The threadgroup-memory argument is
//     declared with TG_MEM (common.h), because [[threadgroup(0)]] would be
//     broken by the threadgroup macro.
//   - half is _Float16 (IEEE binary16; float→half rounds to nearest even);
//     float2/float4/uint2/uint3/int2/int4 are small structs with .x.. fields,
//     [] and element-wise arithmetic.
//   - Math: metal::precise::{exp,sqrt,sin,cos} are glibc's (correctly
//     rounded or within an ulp, where Apple's precise functions are within a
//     few ulps); fma is a true fused multiply-add.
//   - Threads: each thread of a threadgroup runs as a coroutine (ucontext)
//     on its own stack with a guard page. threadgroup_barrier suspends the
//     thread until every thread of the threadgroup has reached a barrier; a
//     simd_* function suspends it until every lane of its simdgroup (32
//     consecutive thread indices) has reached one, then each lane computes
//     the result from all lanes' values (the values are double-buffered by
//     the lane's count of simd operations, so a fast lane cannot overwrite
//     what a slow one has yet to read). Threads that are ready run in a
//     shuffled order (seeded), so a missing barrier shows as a wrong result.
//     A barrier or simd operation that not every thread (lane) reaches —
//     undefined behaviour on a GPU — stops the harness with an error.
//   - simdgroup_float8x8: every lane holds the whole 8×8 matrix; load,
//     store and multiply-accumulate are computed by each lane (the results
//     are identical in every lane, as the collective operation's are; the
//     products are rounded, then added in k order).
//     Only the forms hybrid uses are provided (no origin or transpose).
//   - Threadgroups run one after another, so device memory written by one
//     and read by another is not a race the harness can show.
//
// Include it before the kernels' source; it includes every system header the
// harness needs first, because the address-space macros would break them.
#ifndef HYBRID_MSL_SHIM_H
#define HYBRID_MSL_SHIM_H

#include <signal.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// ---- Scalar and vector types ----

typedef _Float16 half;
typedef unsigned char uchar;
// uint, ushort and ulong come from <sys/types.h> (32, 16 and 64 bits on
// x86-64, as in Metal).
static_assert(sizeof(half) == 2 && sizeof(uint) == 4 && sizeof(ushort) == 2 && sizeof(ulong) == 8, "scalar sizes");

template <class T, int N>
struct vecbase;
template <class T>
struct vecbase<T, 2> {
	T x, y;
};
template <class T>
struct vecbase<T, 3> {
	T x, y, z;
};
template <class T>
struct vecbase<T, 4> {
	T x, y, z, w;
};

template <class T, int N>
struct alignas(sizeof(T) * (N == 3 ? 4 : N)) vec : vecbase<T, N> {
	vec() = default;
	explicit vec(T s) {
		for (int i = 0; i < N; i++) (*this)[i] = s;
	}
	template <class... U, class = std::enable_if_t<sizeof...(U) == N && (N > 1)>>
	vec(U... v) {
		T a[N] = {T(v)...};
		for (int i = 0; i < N; i++) (*this)[i] = a[i];
	}
	T &operator[](int i) { return (&this->x)[i]; }
	const T &operator[](int i) const { return (&this->x)[i]; }
};

#define SHIM_VEC_OP(op)                                                        \
	template <class T, int N>                                                  \
	vec<T, N> operator op(const vec<T, N> &a, const vec<T, N> &b) {            \
		vec<T, N> r;                                                           \
		for (int i = 0; i < N; i++) r[i] = a[i] op b[i];                       \
		return r;                                                              \
	}                                                                          \
	template <class T, int N>                                                  \
	vec<T, N> operator op(const vec<T, N> &a, T b) {                           \
		vec<T, N> r;                                                           \
		for (int i = 0; i < N; i++) r[i] = a[i] op b;                          \
		return r;                                                              \
	}                                                                          \
	template <class T, int N>                                                  \
	vec<T, N> &operator op##=(vec<T, N> &a, const vec<T, N> &b) {              \
		for (int i = 0; i < N; i++) a[i] = a[i] op b[i];                       \
		return a;                                                              \
	}
SHIM_VEC_OP(+)
SHIM_VEC_OP(-)
SHIM_VEC_OP(*)
SHIM_VEC_OP(/)
#undef SHIM_VEC_OP

typedef vec<float, 2> float2;
typedef vec<float, 4> float4;
typedef vec<int, 2> int2;
typedef vec<int, 4> int4;
typedef vec<uint, 2> uint2;
typedef vec<uint, 3> uint3;
typedef vec<uint, 4> uint4;

// ---- The threadgroup runtime: one coroutine per thread ----

namespace mslrt {

enum class St { Ready, Barrier, Simd, Done };

// slotBytes is the largest value a simd function exchanges.
constexpr size_t slotBytes = 64;
constexpr unsigned simdWidth = 32;

struct Fiber {
	ucontext_t uc;
	St st = St::Ready;
	unsigned lane = 0, sg = 0;
	unsigned simdOps = 0; // simd operations completed: selects the exchange slots
};

struct Stack {
	void *base = nullptr;
	size_t size = 0;
};

// Group is the threadgroup being run.
struct Group {
	std::vector<Fiber> fibers;
	std::vector<unsigned> sgSize;
	std::vector<unsigned char> slots; // [sg][parity][lane][slotBytes]
	ucontext_t sched;
	Fiber *cur = nullptr;
	std::function<void(unsigned)> body;
	std::string what; // the kernel and threadgroup, for errors
};

inline Group *G = nullptr;
inline std::vector<Stack> stacks;
constexpr size_t stackBytes = 256 << 10;

[[noreturn]] inline void fail(const std::string &msg) {
	fprintf(stderr, "harness: %s: %s\n", G ? G->what.c_str() : "", msg.c_str());
	fflush(stderr);
	_exit(3);
}

// onFault reports a memory fault (an access past a buffer, the threadgroup
// memory or a thread's stack, all of which end at guard pages) with the
// kernel and threadgroup that made it, and ends the process.
inline void onFault(int sig) {
	char msg[512];
	int n = snprintf(msg, sizeof msg, "harness: %s: %s (an access past a buffer, the threadgroup memory or a stack)\n",
	                 G ? G->what.c_str() : "outside a kernel", sig == SIGSEGV ? "segmentation fault" : "bus error");
	if (n > 0) (void)!write(2, msg, size_t(n) < sizeof msg ? size_t(n) : sizeof msg - 1);
	_exit(3);
}

// installFaultHandler runs onFault on its own stack for SIGSEGV and SIGBUS.
inline void installFaultHandler() {
	static std::vector<char> alt(1 << 16);
	stack_t ss{};
	ss.ss_sp = alt.data();
	ss.ss_size = alt.size();
	sigaltstack(&ss, nullptr);
	struct sigaction sa {};
	sa.sa_handler = onFault;
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGSEGV, &sa, nullptr);
	sigaction(SIGBUS, &sa, nullptr);
}

inline void block(St s) {
	Fiber *f = G->cur;
	f->st = s;
	if (swapcontext(&f->uc, &G->sched) != 0) fail("swapcontext");
}

inline unsigned char *slot(unsigned sg, unsigned parity, unsigned lane) {
	return &G->slots[((sg * 2 + parity) * simdWidth + lane) * slotBytes];
}

// exchange publishes v to the lanes of the caller's simdgroup and, once all
// have, copies every lane's value to all; it returns the simdgroup's size.
template <class T>
unsigned exchange(const T &v, T *all) {
	static_assert(sizeof(T) <= slotBytes, "simd value too large");
	static_assert(std::is_trivially_copyable_v<T>, "simd value not trivially copyable");
	if (!G) fail("simd function called outside a kernel");
	Fiber *f = G->cur;
	unsigned parity = f->simdOps & 1;
	memcpy(slot(f->sg, parity, f->lane), &v, sizeof(T));
	block(St::Simd);
	unsigned n = G->sgSize[f->sg];
	for (unsigned l = 0; l < n; l++) memcpy(&all[l], slot(f->sg, parity, l), sizeof(T));
	f->simdOps++;
	return n;
}

inline void entry(int i) {
	Fiber &f = G->fibers[i];
	G->body(unsigned(i));
	f.st = St::Done;
	swapcontext(&f.uc, &G->sched);
	fail("a finished thread was resumed");
}

inline Stack &stackFor(size_t i) {
	while (stacks.size() <= i) {
		long page = sysconf(_SC_PAGESIZE);
		size_t size = stackBytes + size_t(page);
		void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) fail("mmap of a thread stack");
		mprotect(p, size_t(page), PROT_NONE); // guard page: stacks grow down
		stacks.push_back(Stack{p, size});
	}
	return stacks[i];
}

// run executes body(i) for the n threads of one threadgroup until all
// return, scheduling them as the header comment describes.
inline void run(unsigned n, const std::function<void(unsigned)> &body, const std::string &what, uint64_t seed) {
	Group g;
	G = &g;
	g.what = what;
	g.body = body;
	g.fibers.resize(n);
	unsigned nsg = (n + simdWidth - 1) / simdWidth;
	g.sgSize.assign(nsg, simdWidth);
	if (n % simdWidth) g.sgSize[nsg - 1] = n % simdWidth;
	g.slots.assign(size_t(nsg) * 2 * simdWidth * slotBytes, 0);
	for (unsigned i = 0; i < n; i++) {
		Fiber &f = g.fibers[i];
		f.lane = i % simdWidth;
		f.sg = i / simdWidth;
		Stack &s = stackFor(i);
		if (getcontext(&f.uc) != 0) fail("getcontext");
		f.uc.uc_stack.ss_sp = s.base;
		f.uc.uc_stack.ss_size = s.size;
		f.uc.uc_link = nullptr;
		makecontext(&f.uc, (void (*)())entry, 1, int(i));
	}
	std::mt19937_64 rng(seed);
	std::vector<unsigned> order;
	for (;;) {
		order.clear();
		for (unsigned i = 0; i < n; i++)
			if (g.fibers[i].st == St::Ready) order.push_back(i);
		if (!order.empty()) {
			std::shuffle(order.begin(), order.end(), rng);
			for (unsigned i : order) {
				g.cur = &g.fibers[i];
				if (swapcontext(&g.sched, &g.cur->uc) != 0) fail("swapcontext");
			}
			continue;
		}
		// Nobody can run: release a simdgroup whose lanes all wait at a simd
		// function, else the threadgroup if all wait at a barrier.
		bool released = false;
		for (unsigned s = 0; s < nsg; s++) {
			unsigned simd = 0, done = 0;
			for (unsigned l = 0; l < g.sgSize[s]; l++) {
				St st = g.fibers[s * simdWidth + l].st;
				simd += st == St::Simd;
				done += st == St::Done;
			}
			if (simd == g.sgSize[s]) {
				for (unsigned l = 0; l < g.sgSize[s]; l++) g.fibers[s * simdWidth + l].st = St::Ready;
				released = true;
			} else if (simd > 0 && simd + done == g.sgSize[s]) {
				fail("simdgroup " + std::to_string(s) + ": a simd function not reached by " + std::to_string(done) +
				     " lanes that returned");
			}
		}
		if (released) continue;
		unsigned barrier = 0, done = 0, simd = 0;
		for (Fiber &f : g.fibers) {
			barrier += f.st == St::Barrier;
			done += f.st == St::Done;
			simd += f.st == St::Simd;
		}
		if (done == n) break;
		if (barrier == n) {
			for (Fiber &f : g.fibers) f.st = St::Ready;
			continue;
		}
		fail("deadlock: " + std::to_string(barrier) + " threads at threadgroup_barrier, " + std::to_string(simd) +
		     " at simd functions, " + std::to_string(done) + " returned (a barrier or simd function not reached by all)");
	}
	G = nullptr;
}

} // namespace mslrt

// ---- The Metal standard library, as far as the kernels use it ----

namespace metal {

enum class mem_flags : unsigned { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
inline mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags(unsigned(a) | unsigned(b)); }

inline void threadgroup_barrier(mem_flags) {
	if (!mslrt::G) mslrt::fail("threadgroup_barrier outside a kernel");
	mslrt::block(mslrt::St::Barrier);
}

inline void simdgroup_barrier(mem_flags) {
	char all[mslrt::simdWidth];
	mslrt::exchange(char(0), all);
}

template <class T>
T simd_sum(T v) {
	T all[mslrt::simdWidth];
	unsigned n = mslrt::exchange(v, all);
	T s = all[0];
	for (unsigned l = 1; l < n; l++) s = s + all[l];
	return s;
}

template <class T>
T simd_max(T v) {
	T all[mslrt::simdWidth];
	unsigned n = mslrt::exchange(v, all);
	T s = all[0];
	for (unsigned l = 1; l < n; l++) s = all[l] > s ? all[l] : s;
	return s;
}

template <class T>
T simd_min(T v) {
	T all[mslrt::simdWidth];
	unsigned n = mslrt::exchange(v, all);
	T s = all[0];
	for (unsigned l = 1; l < n; l++) s = all[l] < s ? all[l] : s;
	return s;
}

template <class T>
T simd_broadcast(T v, ushort lane) {
	T all[mslrt::simdWidth];
	unsigned n = mslrt::exchange(v, all);
	if (lane >= n) mslrt::fail("simd_broadcast from a lane past the simdgroup");
	return all[lane];
}

template <class T>
T simd_shuffle_xor(T v, ushort mask) {
	T all[mslrt::simdWidth];
	unsigned n = mslrt::exchange(v, all);
	unsigned from = mslrt::G->cur->lane ^ mask;
	if (from >= n) mslrt::fail("simd_shuffle_xor from a lane past the simdgroup");
	return all[from];
}

namespace precise {
inline float exp(float x) { return ::expf(x); }
inline float sqrt(float x) { return ::sqrtf(x); }
inline float sin(float x) { return ::sinf(x); }
inline float cos(float x) { return ::cosf(x); }
} // namespace precise

inline float fma(float a, float b, float c) { return ::fmaf(a, b, c); }
inline float max(float a, float b) { return ::fmaxf(a, b); }
inline float min(float a, float b) { return ::fminf(a, b); }
inline int max(int a, int b) { return a > b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline uint max(uint a, uint b) { return a > b ? a : b; }
inline uint min(uint a, uint b) { return a < b ? a : b; }
inline float abs(float x) { return ::fabsf(x); }

template <class T, class F>
T as_type(const F &f) {
	static_assert(sizeof(T) == sizeof(F), "as_type between types of different sizes");
	T t;
	memcpy(&t, &f, sizeof(T));
	return t;
}

// simdgroup_matrix<T, Cols, Rows>: every lane holds the whole matrix, e[row][col].
template <class T, int C, int R>
struct simdgroup_matrix {
	T e[R][C];
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;

template <class T, int C, int R = C>
simdgroup_matrix<T, C, R> make_filled_simdgroup_matrix(T v) {
	simdgroup_matrix<T, C, R> m;
	for (int r = 0; r < R; r++)
		for (int c = 0; c < C; c++) m.e[r][c] = v;
	return m;
}

// simdgroup_load: element (r, c) is src[r·elements_per_row + c].
template <class T, int C, int R>
void simdgroup_load(simdgroup_matrix<T, C, R> &d, const T *src, ulong elements_per_row = C) {
	for (int r = 0; r < R; r++)
		for (int c = 0; c < C; c++) d.e[r][c] = src[ulong(r) * elements_per_row + ulong(c)];
}

template <class T, int C, int R>
void simdgroup_store(const simdgroup_matrix<T, C, R> &a, T *dst, ulong elements_per_row = C) {
	for (int r = 0; r < R; r++)
		for (int c = 0; c < C; c++) dst[ulong(r) * elements_per_row + ulong(c)] = a.e[r][c];
}

// simdgroup_multiply_accumulate: d = a·b + c, each element c plus the f32
// products added in k order. (Each product is rounded before it is added:
// a libm fmaf per term made the harness several times slower, and the
// difference from a fused sum, an ulp of a partial sum, is far below every
// tolerance.)
template <class T, int K, int M, int N>
void simdgroup_multiply_accumulate(simdgroup_matrix<T, N, M> &d, const simdgroup_matrix<T, K, M> &a,
                                   const simdgroup_matrix<T, N, K> &b, const simdgroup_matrix<T, N, M> &c) {
	simdgroup_matrix<T, N, M> r;
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			T s = c.e[i][j];
			for (int k = 0; k < K; k++) s += a.e[i][k] * b.e[k][j];
			r.e[i][j] = s;
		}
	d = r;
}

} // namespace metal

// ---- The language's keywords and address spaces ----

#define kernel
#define device
#define constant
#define thread
#define threadgroup
#define TG_MEM(T, name) T *name

#endif // HYBRID_MSL_SHIM_H
