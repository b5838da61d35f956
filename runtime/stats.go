package runtime

import (
	"sort"
	"time"

	"hybrid/devices"
	"hybrid/ops"
)

// Stats records what an executor did: time per op (measured, or modelled
// for simulated devices), time per device, and every copy between devices.
type Stats struct {
	Steps   int
	Devices map[string]*DeviceStats
	Ops     map[string]time.Duration // by op name, summed over steps (ops a Batcher ran in one call count in Devices only)
	Copies  CopyStats
	// Links sums the copies per direction ("cpu -> cpu:1").
	Links map[string]*CopyStats
	// Streams counts the weights copied in for a step (a prefill that
	// multiplies on a GPU with weights resident in host memory).
	Streams CopyStats
	// KVStreams counts the KV caches of attention ops run away from their
	// cache for a step: the cells before it copied in, the step's cells
	// copied back, each a copy.
	KVStreams CopyStats
	// ChainDepth is the most decode steps a chain queued at once
	// (stepChain; 0: none chained).
	ChainDepth int
}

// DeviceStats is one device's share.
type DeviceStats struct {
	Simulated bool
	Ops       int
	Time      time.Duration
}

// CopyStats counts copies.
type CopyStats struct {
	Count int
	Bytes int64
	Time  time.Duration
}

func (s *Stats) init(devs []devices.Device) {
	s.Devices = map[string]*DeviceStats{}
	for _, d := range devs {
		s.Devices[d.Name()] = &DeviceStats{Simulated: d.Info().Simulated}
	}
	s.Ops = map[string]time.Duration{}
	s.Links = map[string]*CopyStats{}
	s.Copies = CopyStats{}
	s.Streams, s.KVStreams = CopyStats{}, CopyStats{}
	s.Steps, s.ChainDepth = 0, 0
}

// Reset clears the counts.
func (e *Executor) ResetStats() { e.Stats.init(e.devs) }

func (s *Stats) op(op *ops.Op, d devices.Device, t time.Duration) {
	ds := s.Devices[d.Name()]
	ds.Ops++
	ds.Time += t
	s.Ops[op.Name] += t
}

func (s *Stats) copy(from, to string, bytes int64, t time.Duration) {
	s.Copies.Count++
	s.Copies.Bytes += bytes
	s.Copies.Time += t
	k := from + " -> " + to
	l := s.Links[k]
	if l == nil {
		l = &CopyStats{}
		s.Links[k] = l
	}
	l.Count++
	l.Bytes += bytes
	l.Time += t
}

// DeviceNames lists the devices in the stats, sorted.
func (s *Stats) DeviceNames() []string {
	var ns []string
	for n := range s.Devices {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}
