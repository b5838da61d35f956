// Package devices defines the interface every kind of hardware implements: hold
// weights in their quantized form, keep f32 activation buffers, run an op, and
// copy f32 to and from the host. A device knows nothing about plans.
package devices

import (
	"errors"
	"time"

	"hybrid/ops"
)

// Info describes a device.
type Info struct {
	Name string // unique: "cpu", "cpu:1", "cuda:0"; simulated devices have names of their own
	// Kind is the kind of hardware it is or stands for: "cpu", "cuda",
	// "metal" or "coreml". Policies name devices by kind or by name.
	Kind string
	// Simulated is true for devices whose times are charged from a hardware
	// profile rather than measured; everything they report says so.
	Simulated bool
	// Memory is the bytes it can hold (weights, KV cache, buffers); 0 means
	// no fixed budget (host memory).
	Memory int64
	// Free is the bytes of Memory not in use by anyone when the device was
	// opened (a GPU shared with other processes has less than Memory); 0
	// means unknown, read as Memory. A policy's `memory: {cuda: auto}` caps
	// the device at it, less a margin.
	Free int64
	// Detail is one human line: the hardware, its threads, its profile.
	Detail string
	// Precision is the arithmetic the device computes in: "" or "f32" for
	// f32 (with f32 accumulation), "f16" for devices such as the Neural
	// Engine that round activations and weights to fp16. The planner and
	// tables show it; the executor keeps values in f32 either way.
	Precision string
	// Threads is the worker threads of a host CPU device; 0 for others.
	Threads int
	// KVBytes is the bytes one element of the device's KV cache takes: 2
	// for an f16 cache (the CPU device, as llama.cpp's default), 4 for f32.
	// 0 means the default, f16. The planner sizes the cache with it.
	KVBytes int
	// Sequences is true for a device that runs steps of several sequences
	// sharing its KV cache (ops.Step's Base and Rows: a server's slots,
	// batched decode); a device without it refuses such steps.
	Sequences bool
	// FusionWindow is how many ops after a value's last reader the device
	// may still be reading it: a device that launches up to k neighbouring
	// ops as one kernel (the CUDA device fuses a decode step's ops in
	// groups) reads an input while the group writes its outputs, so the
	// executor reuses no buffer within that many ops. 0 for devices that
	// run each op alone.
	FusionWindow int
	// FusionTokens is the most tokens of a step that the device fuses ops
	// of; the executor keeps FusionWindow for those steps only (a prompt's
	// buffers are large, and reused at once where nothing is fused). 0:
	// every step.
	FusionTokens int
	// Queues is true for a device whose Run only queues the work and
	// returns (a GPU): two such devices compute at once while the host
	// goes on, so the executor pipelines a prompt's micro-batches across
	// them. Every call that reads a buffer or copies from it waits for the
	// work queued before it, and a copy into a buffer waits for the work
	// queued before it that reads it.
	Queues bool
}

// KVElemBytes is d's KVBytes, or 2 (f16) when it declares none.
func (d Info) KVElemBytes() int {
	if d.KVBytes > 0 {
		return d.KVBytes
	}
	return 2
}

// Host is the pseudo-device of host memory: the per-op ablation copies every
// value through it, and cost models price copies to and from it as copies
// to the host CPU.
var Host = Info{Name: "host", Kind: "cpu"}

// Simulator is implemented by simulated devices: the time an op or a copy
// costs comes from a model of the hardware the device stands for, and the
// executor and the planner use that instead of the wall time of computing
// it on the host.
type Simulator interface {
	// OpTime is the modelled time of op at step st.
	OpTime(op *ops.Op, st ops.Step) time.Duration
	// CopyTime is the modelled time of copying bytes of f32 from one device
	// to another, one of them this one (Host for host memory); ok is false
	// when the model has no link between them.
	CopyTime(from, to Info, bytes int64) (d time.Duration, ok bool)
}

// Buffer is an f32 activation buffer that lives on one device.
type Buffer interface {
	// Len is the buffer's size in f32 elements.
	Len() int
}

// Allocator is the memory half of a device: f32 buffers it owns, views of
// them, and copies to and from the host.
type Allocator interface {
	// Alloc returns an f32 buffer of n elements.
	Alloc(n int) (Buffer, error)
	// Free releases a buffer Alloc returned, and with it the memory its
	// views share; neither may be used again. Freeing a view, a buffer of
	// another device or a buffer twice is an error.
	Free(b Buffer) error
	// View returns a buffer of the first n elements of b that shares b's
	// memory, so that buffers can be reused by values of different sizes and
	// every op sees its values at their exact length.
	View(b Buffer, n int) (Buffer, error)
	// Write copies host data into dst; Read copies src to the host. Both
	// take effect in order with the ops Run before them: Write after they
	// have read dst, Read after they have written src (a device that queues
	// ops finishes them first), so no Sync is needed around either.
	Write(dst Buffer, src []float32) error
	Read(dst []float32, src Buffer) error
}

// Device is one piece of hardware that runs ops.
type Device interface {
	// Name identifies the device, e.g. "cpu" or "cuda:0".
	Name() string
	// Info describes the device for the registry, the planner and tables.
	Info() Info
	// Supports returns nil if the device can run op, or an error saying why not.
	Supports(op *ops.Op) error
	// LoadWeight makes a weight resident in its stored (quantized) form. data is
	// the tensor's bytes as the file holds them; a device may keep the slice.
	LoadWeight(w *ops.Weight, data []byte) error
	// Allocator holds the device's f32 activation buffers.
	Allocator
	// Run executes op for step st, reading in (one buffer per op input) and
	// writing out.
	Run(op *ops.Op, st ops.Step, in []Buffer, out Buffer) error
	// Sync waits for all work the device has been given.
	Sync() error
	// MemoryUsed is the bytes held: weights, buffers and KV cache.
	MemoryUsed() int64
	// Close releases everything the device holds.
	Close() error
}

// Call is one op of a run of ops that a Batcher takes at once: the op, its
// input buffers and its output, as Run takes them.
type Call struct {
	Op  *ops.Op
	In  []Buffer
	Out Buffer
}

// Batcher is a device that takes a run of a step's ops in one call, which
// is what Run does for each call in order, for a fraction of the host time:
// a device that queues ops (a GPU's) may check a run once and keep what it
// derived from it. The caller passes the same slice, unchanged, for each
// step of the same shape (a compiled step's), and a device must still
// notice a slice whose contents changed.
type Batcher interface {
	RunAll(st ops.Step, calls []Call) error
}

// Argmaxer is a device that picks the largest element of each row of a
// buffer itself, so that a greedy step reads back token ids instead of rows
// of logits: ids[r] is the index in row r (elements r·n .. r·n+n-1) of its
// largest, the first on ties, as a loop that moves to i where x[i] > x[best]
// picks it (NaNs are never picked; a NaN at 0 is). Like Read, it waits for
// the ops run before it.
type Argmaxer interface {
	ReadArgmax(src Buffer, n int, ids []int32) error
}

// Chainer is an Argmaxer that can keep a sequence's greedy pick where its
// next step reads its token, so that the host queues that step (an
// ops.Step with Chained set) before it has read the pick back, and the
// device never waits for the host between decode steps.
//
// PickNext queues the pick of src's first row of n elements (as
// ReadArgmax picks it) after the ops run before it, without waiting for
// them: the device's next Chained step of one token reads it as its token,
// at the position after the step's that made src. NextPick waits for the
// oldest pick PickNext queued and has not returned, and returns it; at most
// MaxChained are queued at once. Chains reports whether the device can
// chain now (a device may not while it moves weights or caches in for a
// step).
type Chainer interface {
	Argmaxer
	Chains() bool
	PickNext(src Buffer, n int) error
	NextPick() (int32, error)
}

// PickTimer is a Chainer that times its picks on the device: PickGap
// gives the device's time between the pick NextPick read last and the pick
// queued just before it, ok false where the read before was not of that
// pick. Picks queued back to back are a step apart on the device; a device
// that ran dry between them (its host late to queue) makes the gap longer,
// never shorter, so the shortest gap seen is a step's device time, whatever
// the host's own delays (runtime's grownDepth). Call it from the goroutine
// that called NextPick.
type PickTimer interface {
	Chainer
	PickGap() (gap time.Duration, ok bool)
}

// MaxChained is the most picks a Chainer holds queued at once (a chain
// queues eight, more where a step is short: runtime's grownDepth).
const MaxChained = 32

// SampleChainer is a Chainer that also makes a sequence's sampled picks
// itself: SampleNext queues, as PickNext does, the pick that a sampler with
// settings p (runtime.Sampler, without a repeat penalty) makes from src's
// first row of n elements with draw p.Draw, where NextPick reads it back:
// the row's p.K largest (as ReadTopK orders them), their softmax, those
// whose running sum of probabilities first reaches p.TopP, their softmax at
// temperature p.Temp, and the first whose running sum exceeds the draw (the
// last if none does), in the sampler's float operations and order
// (runtime's sampleExp for e^x), so that the pick is the sampler's. A row
// holding a NaN gets the pick -1, and the steps chained after it read no
// meaningful token: the caller drops them and samples that row itself.
type SampleChainer interface {
	Chainer
	SampleNext(src Buffer, n int, p SampleSpec) error
}

// SampleSpec is a sampled pick's settings (SampleChainer): top-k (1 <= K
// <= MaxPicks), top-p (0 < TopP <= 1), temperature (Temp > 0), and the
// pick's uniform draw in [0, 1).
type SampleSpec struct {
	K          int
	TopP, Temp float32
	Draw       float32
}

// MaxPicks is the most elements of a row that ReadTopK picks.
const MaxPicks = 256

// Pick is one of a row's largest elements: its index in the row and value.
type Pick struct {
	Index int32
	Value float32
}

// TopKer is a device that picks the m largest elements of each row of a
// buffer itself, so that a sampled step reads back a few candidates a row
// instead of rows of logits: picks holds len(picks)/m rows of m, row r's
// from elements r·n .. r·n+n-1 of src, largest first and equal ones by lower
// index (1 <= m <= min(n, MaxPicks)). A row holding a NaN, where no such
// order holds, gets Index -1 in its first pick and nothing else: its caller
// reads that row. Like Read, it waits for the ops run before it.
type TopKer interface {
	ReadTopK(src Buffer, n, m int, picks []Pick) error
}

// MemoryPeak is the most memory a device has held at once, by what held it,
// and what its driver holds besides for the device's context and code.
type MemoryPeak struct {
	Total     int64 `json:"total_bytes"`     // Weights + KVCache + Streaming + Buffers + Scratch, at the peak
	Weights   int64 `json:"weights_bytes"`   // resident weights
	KVCache   int64 `json:"kv_cache_bytes"`  // KV caches of the layers that attend here
	Streaming int64 `json:"streaming_bytes"` // slots of weights (and KV cells) streamed in for a step
	Buffers   int64 `json:"buffers_bytes"`   // the executor's activation buffers
	Scratch   int64 `json:"scratch_bytes"`   // the device's own working memory (quantized activations, partial sums)
	Runtime   int64 `json:"driver_bytes"`    // the driver's, when asked: the context, its kernels and graphs, outside Total
}

// PeakReporter is implemented by devices that keep their peak memory, so
// that a run can say what a GPU really held next to what its plan counted.
type PeakReporter interface {
	MemoryPeak() MemoryPeak
}

// ErrUnsupported is wrapped by Supports' errors.
var ErrUnsupported = errors.New("unsupported")

// PeerCopier is implemented by devices that can copy a buffer straight into
// another device's buffer, without staging it in host memory (GPUs of one
// host, peer to peer over NVLink or PCIe). The copy keeps the order of both
// devices' work, as Write and Read do: after the ops run before it on either
// device, before the ops run after it.
type PeerCopier interface {
	// CopyTo copies the first n elements of src, on this device, into dst
	// on device to. ok is false, with nothing done, when this device cannot
	// copy to that one directly; the caller then copies through the host.
	CopyTo(to Device, dst, src Buffer, n int) (ok bool, err error)
}

// WeightsLoader is implemented by devices that hold many weights in one
// allocation: a GPU driver rounds each allocation up to its pages (2 MiB),
// which a weight apiece pays again and again, unseen by the plan's memory.
type WeightsLoader interface {
	// LoadWeights loads ws together, data[i] being ws[i]'s bytes as
	// LoadWeight takes them. Weights already resident are left as they are.
	LoadWeights(ws []*ops.Weight, data [][]byte) error
}

// WeightStreamer is implemented by devices that can run an op whose weight
// is resident on another device: the weight's bytes are copied in for the
// step ("streamed") instead of being held, as a GPU multiplies a prompt with
// the weights of layers that live in host memory. The planner weighs the
// copy against running the op where the weight lives.
type WeightStreamer interface {
	// StreamWeight makes w usable by the ops Run on this device after it,
	// until StreamWeight has been called twice more (a device may keep two
	// streamed weights, one copying while the other is read). data is the
	// tensor's bytes as the file holds them, as LoadWeight's. A weight
	// already resident here is left as it is.
	StreamWeight(w *ops.Weight, data []byte) error
}

// KVHost is implemented by devices whose KV cache lies in host memory (the
// CPU device), so that a layer's attention can run for one step on another
// device (a KVStreamer): the cells before the step are copied from here
// into that device, and the cells the step appends there are copied back.
type KVHost interface {
	// KVCells returns cells [cell, cell+n) of the KV cache of attention op's
	// layer in place, keys and values as binary16 (n × KVHeads·HeadDim
	// each), making the cache if the layer has none yet. Writes into them
	// are what the device's next attention of that layer reads.
	KVCells(op *ops.Op, cell, n int) (k, v []uint16, err error)
}

// KVStreamer is implemented by devices that can run an attention op whose
// KV cache is resident on another device, for one step: StreamKV gives it a
// cache of the sequence's cells before the step, Run appends the step's
// keys and values to that cache and attends over it, and StreamedKV copies
// the appended cells out, back to the cache's home. A prompt's layers whose
// cache lives in host memory then attend on a GPU that has just computed
// their keys and values, and only the new cells cross the link. A device
// that also streams weights keeps that cache in its two slots of streamed
// weights, keys in one and values in the other (no op reads a slot while
// attention runs), grown where they are smaller; the planner counts it so.
type KVStreamer interface {
	// StreamKV makes the next Run of attention op on this device, for step
	// st, use a cache of its own holding the sequence's cells before the
	// step: k and v, st.Pos × KVHeads·HeadDim binary16 each (empty for a
	// sequence's first step), copied in after the ops Run before it.
	StreamKV(op *ops.Op, st ops.Step, k, v []uint16) error
	// StreamedKV copies the keys and values that the Run after StreamKV
	// appended, len(st.Tokens) cells, into k and v once that Run is done.
	StreamedKV(op *ops.Op, st ops.Step, k, v []uint16) error
}
