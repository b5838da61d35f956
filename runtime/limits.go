package runtime

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"hybrid/devices/cpu/kernels"
	"hybrid/models/llama"
)

// Limits on the sizes a caller (a flag, a request) gives a session. Each is
// checked before anything is allocated from it.
const (
	// MaxContext is the most positions a context may have, whatever the
	// model says or an override asks: 1Mi positions is 8× the longest
	// context of the Llama 3 family (131072), and the KV cache of a
	// TinyLlama-sized model at this length is already 22 GiB.
	MaxContext = 1 << 20
	// MaxThreads is the most CPU worker threads per CPU device (the
	// kernels' pool's own bound).
	MaxThreads = kernels.MaxThreads
	// MaxCPUs is the most separate CPU devices: the planner plans for at
	// most 16 devices.
	MaxCPUs = 16
	// MaxBenchReps is the most repetitions of a bench: each one keeps a
	// measurement, and llama-bench's default is 5.
	MaxBenchReps = 1000
)

// kvMemoryShare is the share of this machine's memory a KV cache may take:
// half, since the model's weights (mapped from the file), the activations and
// the rest of the system need the other half.
const kvMemoryShare = 2

// unknownMemory is the memory assumed where this machine's cannot be read
// (not Linux): generous, so that it refuses only what no machine would hold.
const unknownMemory int64 = 64 << 30

// KVCacheBytes is the memory the KV cache of ctx positions takes on the CPU
// device, whose cache is f16 as llama.cpp's default: keys and values, every
// layer, every position, every KV head's features, 2 bytes each.
func KVCacheBytes(c llama.Config, ctx int) int64 {
	return 2 * int64(c.Layers) * int64(ctx) * int64(c.KVHeads) * int64(c.HeadDim) * 2
}

// CheckContext checks a context of ctx positions for the model of config c:
// at least 1; at most the model's context length (its training context,
// llama.context_length), or with override at most MaxContext; and its KV
// cache no more than half of this machine's memory. The error says which
// bound ctx passes and, for memory, the bytes the cache would take and the
// limit.
func CheckContext(c llama.Config, ctx int, override bool) error {
	mem, known := hostMemory()
	return checkContext(c, ctx, override, mem, known)
}

func checkContext(c llama.Config, ctx int, override bool, mem int64, known bool) error {
	switch {
	case ctx < 1:
		return fmt.Errorf("runtime: a context of %d positions: want at least 1", ctx)
	case ctx > MaxContext:
		return fmt.Errorf("runtime: a context of %d positions is more than the %d hybrid allows", ctx, MaxContext)
	case ctx > c.Context && !override:
		return fmt.Errorf("runtime: a context of %d positions is more than the model's %d (%s.context_length); an override allows up to %d", ctx, c.Context, c.Arch, MaxContext)
	}
	need := KVCacheBytes(c, ctx)
	limit := mem / kvMemoryShare
	if need > limit {
		of := fmt.Sprintf("half of this machine's %s of memory", bytesText(mem))
		if !known {
			of = fmt.Sprintf("half of the %s assumed where a machine's memory is unknown", bytesText(mem))
		}
		return fmt.Errorf("runtime: a context of %d positions needs a KV cache of %s (%d bytes: K and V × %d layers × %d positions × %d KV heads × %d features × 2 bytes), more than the %s (%d bytes, %s) a KV cache may take",
			ctx, bytesText(need), need, c.Layers, ctx, c.KVHeads, c.HeadDim, bytesText(limit), limit, of)
	}
	return nil
}

// checkDevices checks the thread and CPU-device counts of o before any device
// is opened: each CPU device starts its threads when it is made.
func checkDevices(o SessionOptions) error {
	if o.Threads < 0 || o.Threads > MaxThreads {
		return fmt.Errorf("runtime: %d threads: want 0 (every core) or 1..%d", o.Threads, MaxThreads)
	}
	if o.CPUs < 0 || o.CPUs > MaxCPUs {
		return fmt.Errorf("runtime: %d CPU devices: want 0..%d", o.CPUs, MaxCPUs)
	}
	return nil
}

// hostMemory is this machine's memory in bytes, read once, and whether it is
// known; where it is not, unknownMemory.
var hostMemory = sync.OnceValues(func() (int64, bool) {
	// /proc/meminfo exists on Linux only; elsewhere the open fails and the
	// fixed figure stands.
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return unknownMemory, false
	}
	defer f.Close()
	n, err := memTotal(f)
	if err != nil {
		return unknownMemory, false
	}
	return n, true
})

// memTotal reads the MemTotal line of /proc/meminfo ("MemTotal: 24683620 kB").
func memTotal(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "MemTotal:" || f[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || kb <= 0 || kb > 1<<43 { // 8 EiB: past that, not a real figure
			return 0, fmt.Errorf("runtime: /proc/meminfo: MemTotal %q", f[1])
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("runtime: /proc/meminfo has no MemTotal line")
}

// bytesText is n in the largest binary unit that leaves at least 1.
func bytesText(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}
