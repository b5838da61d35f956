package tokenizer

// llama.cpp finds some special tokens (end-of-turn, FIM, ...) by walking its
// token_to_id map, a std::unordered_map<std::string, llama_token> filled by
// token_to_id[text] = id for id 0, 1, 2, ..., and taking the first token
// whose text is on a list. Which of several such tokens comes first is the
// map's iteration order, which is fixed by the C++ library: this file
// reproduces that of libstdc++ (GCC, 64-bit), with which llama.cpp is built
// on Linux. libc++ (macOS) orders differently.

// stdHash is libstdc++'s std::hash<std::string> on a 64-bit machine:
// std::_Hash_bytes (a MurmurHash2 variant) with seed 0xc70f6907.
func stdHash(s string) uint64 {
	const mul = 0xc6a4a7935bd1e995
	mix := func(v uint64) uint64 { return v ^ v>>47 }
	h := 0xc70f6907 ^ uint64(len(s))*mul
	n := len(s) &^ 7
	for i := 0; i < n; i += 8 {
		var d uint64
		for k := 7; k >= 0; k-- {
			d = d<<8 | uint64(s[i+k])
		}
		h ^= mix(d*mul) * mul
		h *= mul
	}
	if len(s)&7 != 0 {
		var d uint64
		for k := len(s) - 1; k >= n; k-- {
			d = d<<8 | uint64(s[k])
		}
		h ^= d
		h *= mul
	}
	return mix(mix(h) * mul)
}

// stdPrimes is libstdc++'s std::__detail::__prime_list (64-bit), the bucket
// counts its unordered containers grow through.
var stdPrimes = [...]uint64{
	2, 3, 5, 7, 11, 13, 17, 19,
	23, 29, 31, 37, 41, 43, 47, 53,
	59, 61, 67, 71, 73, 79, 83, 89,
	97, 103, 109, 113, 127, 137, 139, 149,
	157, 167, 179, 193, 199, 211, 227, 241,
	257, 277, 293, 313, 337, 359, 383, 409,
	439, 467, 503, 541, 577, 619, 661, 709,
	761, 823, 887, 953, 1031, 1109, 1193, 1289,
	1381, 1493, 1613, 1741, 1879, 2029, 2179, 2357,
	2549, 2753, 2971, 3209, 3469, 3739, 4027, 4349,
	4703, 5087, 5503, 5953, 6427, 6949, 7517, 8123,
	8783, 9497, 10273, 11113, 12011, 12983, 14033, 15173,
	16411, 17749, 19183, 20753, 22447, 24281, 26267, 28411,
	30727, 33223, 35933, 38873, 42043, 45481, 49201, 53201,
	57557, 62233, 67307, 72817, 78779, 85229, 92203, 99733,
	107897, 116731, 126271, 136607, 147793, 159871, 172933, 187091,
	202409, 218971, 236897, 256279, 277261, 299951, 324503, 351061,
	379787, 410857, 444487, 480881, 520241, 562841, 608903, 658753,
	712697, 771049, 834181, 902483, 976369, 1056323, 1142821, 1236397,
	1337629, 1447153, 1565659, 1693859, 1832561, 1982627, 2144977, 2320627,
	2510653, 2716249, 2938679, 3179303, 3439651, 3721303, 4026031, 4355707,
	4712381, 5098259, 5515729, 5967347, 6456007, 6984629, 7556579, 8175383,
	8844859, 9569143, 10352717, 11200489, 12117689, 13109983, 14183539, 15345007,
	16601593, 17961079, 19431899, 21023161, 22744717, 24607243, 26622317, 28802401,
	31160981, 33712729, 36473443, 39460231, 42691603, 46187573, 49969847, 54061849,
	58488943, 63278561, 68460391, 74066549, 80131819, 86693767, 93793069, 101473717,
	109783337, 118773397, 128499677, 139022417, 150406843, 162723577, 176048909, 190465427,
	206062531, 222936881, 241193053, 260944219, 282312799, 305431229, 330442829, 357502601,
	386778277, 418451333, 452718089, 489790921, 529899637, 573292817, 620239453, 671030513,
	725980837, 785430967, 849749479, 919334987, 994618837, 1076067617, 1164186217, 1259520799,
	1362662261, 1474249943, 1594975441, 1725587117, 1866894511, 2019773507, 2185171673, 2364114217,
	2557710269, 2767159799, 2993761039, 3238918481, 3504151727, 3791104843, 4101556399, 4294967291,
	6442450933, 8589934583, 12884901857, 17179869143, 25769803693, 34359738337, 51539607367, 68719476731,
	103079215087, 137438953447, 206158430123, 274877906899, 412316860387, 549755813881, 824633720731, 1099511627689,
	1649267441579, 2199023255531, 3298534883309, 4398046511093, 6597069766607, 8796093022151, 13194139533241, 17592186044399,
	26388279066581, 35184372088777, 52776558133177, 70368744177643, 105553116266399, 140737488355213, 211106232532861, 281474976710597,
	562949953421231, 1125899906842597, 2251799813685119, 4503599627370449, 9007199254740881, 18014398509481951, 36028797018963913, 72057594037927931,
	144115188075855859, 288230376151711717, 576460752303423433, 1152921504606846883, 2305843009213693951, 4611686018427387847, 9223372036854775783, 18446744073709551557,
}

// stdRehash is libstdc++'s _Prime_rehash_policy with the maximum load
// factor 1, which std::unordered_map starts with.
type stdRehash struct {
	nextResize uint64
}

// nextBucket is _Prime_rehash_policy::_M_next_bkt: the bucket count for
// at least n buckets.
func (p *stdRehash) nextBucket(n uint64) uint64 {
	fast := [...]uint64{2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13}
	if n < uint64(len(fast)) {
		if n == 0 {
			return 1
		}
		p.nextResize = fast[n]
		return fast[n]
	}
	// lower_bound over the list from its seventh prime, the last one
	// excluded.
	last := len(stdPrimes) - 1
	i := 6
	for i < last && stdPrimes[i] < n {
		i++
	}
	if i == last {
		p.nextResize = ^uint64(0)
	} else {
		p.nextResize = stdPrimes[i]
	}
	return stdPrimes[i]
}

// needRehash is _Prime_rehash_policy::_M_need_rehash for inserting one
// element into buckets buckets holding elems: the new bucket count, or 0.
func (p *stdRehash) needRehash(buckets, elems uint64) uint64 {
	if elems+1 <= p.nextResize {
		return 0
	}
	minBuckets := elems + 1
	if p.nextResize == 0 {
		minBuckets = max(minBuckets, 11)
	}
	if minBuckets >= buckets {
		return p.nextBucket(max(minBuckets+1, buckets*2))
	}
	p.nextResize = buckets
	return 0
}

// mapOrder returns the token ids in the order llama.cpp's token_to_id map
// iterates them when llama.cpp is built with libstdc++. texts must be
// distinct, as New makes them.
//
// libstdc++ keeps all elements in one singly linked list, each bucket's
// elements together. An element whose bucket is empty goes to the front
// of the list, else to the front of its bucket's run; a rehash walks the
// list and moves each element the same way into the new buckets.
func mapOrder(texts []string) []int32 {
	n := len(texts)
	hash := make([]uint64, n)
	for i, s := range texts {
		hash[i] = stdHash(s)
	}
	// next[i] follows element i in the list, -1 at the end; next[n] is
	// the list's head (libstdc++'s _M_before_begin). bucket[b] is the
	// element before bucket b's run (n for the head), -1 if b is empty.
	next := make([]int32, n+1)
	next[n] = -1
	head := int32(n)
	bucket := []int32{-1}
	var policy stdRehash
	for i := range n {
		if nb := policy.needRehash(uint64(len(bucket)), uint64(i)); nb != 0 {
			bucket = make([]int32, nb)
			for b := range bucket {
				bucket[b] = -1
			}
			e := next[head]
			next[head] = -1
			var headBucket uint64
			for e >= 0 {
				after := next[e]
				b := hash[e] % nb
				if bucket[b] < 0 {
					next[e] = next[head]
					next[head] = e
					bucket[b] = head
					if next[e] >= 0 {
						bucket[headBucket] = e
					}
					headBucket = b
				} else {
					next[e] = next[bucket[b]]
					next[bucket[b]] = e
				}
				e = after
			}
		}
		nb := uint64(len(bucket))
		b := hash[i] % nb
		e := int32(i)
		if bucket[b] >= 0 {
			next[e] = next[bucket[b]]
			next[bucket[b]] = e
		} else {
			next[e] = next[head]
			next[head] = e
			if next[e] >= 0 {
				bucket[hash[next[e]]%nb] = e
			}
			bucket[b] = head
		}
	}
	order := make([]int32, 0, n)
	for e := next[head]; e >= 0; e = next[e] {
		order = append(order, e)
	}
	return order
}
