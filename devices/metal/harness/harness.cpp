// harness.cpp runs hybrid's Metal kernels on the CPU: the kernels' MSL source
// (metal.Source, exactly what the Mac compiles) is compiled as C++ under
// msl_shim.h, and the harness executes dispatch plans sent on stdin the way
// the darwin device encodes them: bind buffers (with byte offsets) in order,
// the params bytes after them, threadgroup memory of Shared bytes, and a grid
// of Groups threadgroups of Threads threads.
//
// Build (devices/metal/harness_test.go does this): write metal.Source to
// DIR/kernels.metal and empty files DIR/metal_stdlib, DIR/metal_simdgroup and
// DIR/metal_simdgroup_matrix, then
//
//	g++ -std=c++17 -O2 -ffp-contract=off -Wno-attributes -IDIR -o harness harness.cpp
//
// Protocol (little-endian), one command byte at a time:
//
//	'L' → text lines "kernel NAME BUFFERS PARAMS_BYTES TG" for every kernel,
//	      "const NAME VALUE" for the constants common.h shares with the plan,
//	      then "end".
//	'R' u32 nbuf {u64 size, bytes}*; u32 ndisp { u32 len, name; u32 nbind
//	      {u32 buffer, u64 offset}*; u32 plen, params; u32 groups[3];
//	      u32 threads[3]; u32 shared }*
//	    → u32 0 and every buffer's bytes (sizes as sent), or u32 1, u32 len,
//	      message for a malformed request. A fault inside a kernel (a barrier
//	      not reached by all, a read past a buffer: every buffer and the
//	      threadgroup memory end at a guard page) ends the process.
//	'Q' → exit.
#include "msl_shim.h"

#include "kernels.metal"

#undef kernel
#undef device
#undef constant
#undef thread
#undef threadgroup

namespace {

// Launch is what one thread of one dispatch is called with.
struct Launch {
	std::vector<char *> bufs; // bound pointers, offsets applied
	void *params = nullptr;
	void *tg = nullptr;
	uint3 tgpig, tpitg, ntg;
	uint tiisg = 0, sgitg = 0;
};

template <class F>
struct Adapt;

// Adapt deduces a kernel's calling convention from its signature: pointer
// arguments up to the first reference are its buffers, the reference its
// params struct, a pointer after it the threadgroup memory, and the last
// five THREAD_IDS.
template <class... A>
struct Adapt<void (*)(A...)> {
	using Tup = std::tuple<A...>;
	static constexpr size_t N = sizeof...(A);
	static constexpr size_t pidx() {
		constexpr bool ref[] = {std::is_reference_v<A>...};
		for (size_t i = 0; i < N; i++)
			if (ref[i]) return i;
		return N;
	}
	static_assert(pidx() < N - 5, "kernel without a params struct");
	static constexpr size_t nbuf = pidx();
	static constexpr bool tg = pidx() + 1 < N - 5;
	using P = std::remove_reference_t<std::tuple_element_t<pidx(), Tup>>;

	template <size_t I>
	static std::tuple_element_t<I, Tup> arg(Launch &L) {
		using T = std::tuple_element_t<I, Tup>;
		if constexpr (I < pidx()) {
			return reinterpret_cast<T>(L.bufs[I]);
		} else if constexpr (I == pidx()) {
			return *reinterpret_cast<P *>(L.params);
		} else if constexpr (I < N - 5) {
			return reinterpret_cast<T>(L.tg);
		} else if constexpr (I == N - 5) {
			return L.tgpig;
		} else if constexpr (I == N - 4) {
			return L.tpitg;
		} else if constexpr (I == N - 3) {
			return L.ntg;
		} else if constexpr (I == N - 2) {
			return L.tiisg;
		} else {
			return L.sgitg;
		}
	}
	template <size_t... I>
	static void call(void (*f)(A...), Launch &L, std::index_sequence<I...>) {
		f(arg<I>(L)...);
	}
};

struct Kernel {
	size_t nbuf, psize;
	bool tg;
	std::function<void(Launch &)> fn;
};

std::vector<std::pair<std::string, Kernel>> kernels;

template <class F>
void reg(const char *name, F f) {
	using Ad = Adapt<F>;
	kernels.push_back({name, Kernel{Ad::nbuf, sizeof(typename Ad::P), Ad::tg, [f](Launch &L) {
		                                Ad::call(f, L, std::make_index_sequence<Ad::N>{});
	                                }}});
}

void registerAll() {
#define REG_MATMUL(name) reg("matvec_" #name, matvec_##name), reg("matmul_" #name, matmul_##name);
#define REG_EMBED(name) reg("embed_" #name, embed_##name);
#define REG_NORM(name) reg("rms_norm_" #name, rms_norm_##name), reg("add_bias_" #name, add_bias_##name);
	FOR_WEIGHT_TYPES(REG_MATMUL)
	FOR_WEIGHT_TYPES(REG_EMBED)
	FOR_NORM_TYPES(REG_NORM)
#define REG(name) reg(#name, name);
	REG(rope)
	REG(silu_mul)
	REG(add_f32)
	REG(copy_f32)
	REG(kv_store)
	REG(attention)
}

const Kernel *find(const std::string &name) {
	for (auto &k : kernels)
		if (k.first == name) return &k.second;
	return nullptr;
}

// Guarded is memory whose last byte is followed by an inaccessible page, its
// start 16-byte aligned (so an overrun of more than 15 bytes faults).
struct Guarded {
	char *map = nullptr, *data = nullptr;
	size_t mapLen = 0, size = 0;
	Guarded() = default;
	explicit Guarded(size_t n) : size(n) {
		size_t page = size_t(sysconf(_SC_PAGESIZE));
		size_t pages = (n + 15 + page - 1) / page;
		mapLen = (pages + 1) * page;
		void *p = mmap(nullptr, mapLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			fprintf(stderr, "harness: mmap of %zu bytes failed\n", n);
			_exit(3);
		}
		map = static_cast<char *>(p);
		char *guard = map + pages * page;
		mprotect(guard, page, PROT_NONE);
		data = reinterpret_cast<char *>(reinterpret_cast<uintptr_t>(guard - n) & ~uintptr_t(15));
	}
	Guarded(const Guarded &) = delete;
	Guarded &operator=(const Guarded &) = delete;
	~Guarded() {
		if (map) munmap(map, mapLen);
	}
};

bool readAll(void *p, size_t n) { return fread(p, 1, n, stdin) == n; }

template <class T>
T get() {
	T v{};
	if (!readAll(&v, sizeof v)) {
		fprintf(stderr, "harness: short read\n");
		_exit(4);
	}
	return v;
}

void put(const void *p, size_t n) { fwrite(p, 1, n, stdout); }

struct Binding {
	uint32_t buf;
	uint64_t off;
};

struct Disp {
	std::string name;
	std::vector<Binding> binds;
	std::vector<char> params;
	uint32_t groups[3], threads[3], shared;
};

void list() {
	for (auto &k : kernels) printf("kernel %s %zu %zu %d\n", k.first.c_str(), k.second.nbuf, k.second.psize, k.second.tg ? 1 : 0);
	printf("const MV_NR %d\nconst MV_NSG %d\nconst MM_BM %d\nconst MM_BN %d\nconst MM_BK %d\nconst MM_NSG %d\n", MV_NR,
	       MV_NSG, MM_BM, MM_BN, MM_BK, MM_NSG);
	printf("const ATT_NSG %d\nconst ATT_MAXT %d\nconst ROPE_MAX_PAIRS %d\nend\n", ATT_NSG, ATT_MAXT, ROPE_MAX_PAIRS);
	fflush(stdout);
}

void runRequest() {
	uint32_t nbuf = get<uint32_t>();
	std::vector<std::unique_ptr<Guarded>> bufs;
	for (uint32_t i = 0; i < nbuf; i++) {
		uint64_t size = get<uint64_t>();
		bufs.push_back(std::make_unique<Guarded>(size_t(size)));
		if (!readAll(bufs[i]->data, size)) _exit(4);
	}
	uint32_t ndisp = get<uint32_t>();
	std::vector<Disp> ds(ndisp);
	for (Disp &d : ds) {
		uint32_t len = get<uint32_t>();
		d.name.resize(len);
		if (!readAll(d.name.data(), len)) _exit(4);
		uint32_t nb = get<uint32_t>();
		for (uint32_t i = 0; i < nb; i++) {
			Binding b;
			b.buf = get<uint32_t>();
			b.off = get<uint64_t>();
			d.binds.push_back(b);
		}
		uint32_t plen = get<uint32_t>();
		d.params.resize(plen);
		if (!readAll(d.params.data(), plen)) _exit(4);
		for (auto &g : d.groups) g = get<uint32_t>();
		for (auto &t : d.threads) t = get<uint32_t>();
		d.shared = get<uint32_t>();
	}
	auto bad = [](const std::string &msg) {
		uint32_t one = 1, len = uint32_t(msg.size());
		put(&one, 4);
		put(&len, 4);
		put(msg.data(), len);
		fflush(stdout);
	};
	// Check every dispatch before running any.
	for (Disp &d : ds) {
		const Kernel *k = find(d.name);
		if (!k) return bad("no kernel " + d.name);
		if (d.binds.size() != k->nbuf)
			return bad(d.name + ": " + std::to_string(d.binds.size()) + " buffers bound, kernel takes " + std::to_string(k->nbuf));
		if (d.params.size() != k->psize)
			return bad(d.name + ": " + std::to_string(d.params.size()) + " params bytes, kernel's struct has " +
			           std::to_string(k->psize));
		for (Binding &b : d.binds)
			if (b.buf >= nbuf || b.off > bufs[b.buf]->size) return bad(d.name + ": binding past its buffer");
		if (k->tg != (d.shared > 0)) return bad(d.name + ": threadgroup memory given to a kernel without it, or not given");
		if (d.shared % 16) return bad(d.name + ": threadgroup memory not a multiple of 16 bytes");
		uint64_t nt = uint64_t(d.threads[0]) * d.threads[1] * d.threads[2];
		if (nt == 0 || nt > 1024) return bad(d.name + ": threadgroup of " + std::to_string(nt) + " threads");
	}
	for (size_t di = 0; di < ds.size(); di++) {
		Disp &d = ds[di];
		const Kernel *k = find(d.name);
		// The params live in memory of their exact size, aligned as setBytes
		// would have them.
		Guarded params(d.params.size());
		memcpy(params.data, d.params.data(), d.params.size());
		Guarded tg(d.shared);
		uint3 ntg(d.threads[0], d.threads[1], d.threads[2]);
		unsigned nt = d.threads[0] * d.threads[1] * d.threads[2];
		for (uint32_t gz = 0; gz < d.groups[2]; gz++)
			for (uint32_t gy = 0; gy < d.groups[1]; gy++)
				for (uint32_t gx = 0; gx < d.groups[0]; gx++) {
					// Threadgroup memory starts as garbage on a GPU.
					memset(tg.data, 0x7f, d.shared);
					Launch L;
					for (Binding &b : d.binds) L.bufs.push_back(bufs[b.buf]->data + b.off);
					L.params = params.data;
					L.tg = d.shared ? tg.data : nullptr;
					L.tgpig = uint3(gx, gy, gz);
					L.ntg = ntg;
					auto body = [&](unsigned i) {
						Launch T = L;
						T.tpitg = uint3(i % ntg.x, (i / ntg.x) % ntg.y, i / (ntg.x * ntg.y));
						T.tiisg = i % mslrt::simdWidth;
						T.sgitg = i / mslrt::simdWidth;
						k->fn(T);
					};
					std::string what = d.name + " group (" + std::to_string(gx) + "," + std::to_string(gy) + "," +
					                   std::to_string(gz) + ")";
					mslrt::run(nt, body, what, (uint64_t(di) << 48) ^ (uint64_t(gz) << 32) ^ (uint64_t(gy) << 16) ^ gx);
				}
	}
	uint32_t zero = 0;
	put(&zero, 4);
	for (auto &b : bufs) put(b->data, b->size);
	fflush(stdout);
}

} // namespace

int main() {
	mslrt::installFaultHandler();
	registerAll();
	for (;;) {
		int c = fgetc(stdin);
		switch (c) {
		case 'L':
			list();
			break;
		case 'R':
			runRequest();
			break;
		case 'Q':
		case EOF:
			return 0;
		default:
			fprintf(stderr, "harness: unknown command %d\n", c);
			return 4;
		}
	}
}
