package runtime

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"time"

	"hybrid/ops"
)

// OpTime is one row of a decode step's breakdown: the ops of one name in
// every layer ("attn_q" stands for blk.0.attn_q, blk.1.attn_q, ...), or one
// op outside the layers ("output").
type OpTime struct {
	Op     string `json:"op"`
	Kind   string `json:"kind"`
	Device string `json:"device"`
	// PerStep is how many ops of this name a step runs.
	PerStep int `json:"per_step"`
	// MS is their time per decode step, in milliseconds.
	MS float64 `json:"ms_per_token"`
	// WeightBytes is what their weights hold per step (mat-muls: whole
	// matrices), 0 for ops without one.
	WeightBytes int64 `json:"weight_bytes_per_step"`
}

// GBs is the weight bytes the row's ops read per second, 0 without weights.
func (o OpTime) GBs() float64 {
	if o.WeightBytes == 0 || o.MS <= 0 {
		return 0
	}
	return float64(o.WeightBytes) / (o.MS * 1e6)
}

// Breakdown is where a decode step's time goes, by op: each op timed alone
// (waited for on devices that queue work), so its total is slower than an
// untimed step on such devices, and the rest of the step (the executor's
// walk, copies between devices, reading the logits) is WallMS − Σ MS.
type Breakdown struct {
	Tokens int      `json:"tokens"`
	Depth  int      `json:"depth"`
	WallMS float64  `json:"wall_ms_per_token"`
	Ops    []OpTime `json:"ops"`
	// CopiesMS is the time per step of the copies between devices.
	CopiesMS float64 `json:"copies_ms_per_token"`
}

// layerPrefix is the part of an op's name that says its layer.
var layerPrefix = regexp.MustCompile(`^blk\.\d+\.`)

// DecodeBreakdown decodes n tokens after depth random ones (prefilled,
// untimed) with every op timed alone, and returns the step's time by op
// name, the slowest first. It changes the KV cache like any decode.
func (e *Executor) DecodeBreakdown(n, depth int, seed uint64) (*Breakdown, error) {
	if n < 1 || depth < 0 || depth+n > e.ctx {
		return nil, fmt.Errorf("runtime: breakdown of %d tokens at depth %d does not fit the context of %d", n, depth, e.ctx)
	}
	r := rand.New(rand.NewPCG(seed, 2))
	if depth > 0 {
		if _, err := e.Prefill(e.randomTokens(r, depth), 0); err != nil {
			return nil, err
		}
	}
	c, err := e.compile(stepKey{n: 1})
	if err != nil {
		return nil, err
	}
	sync := e.opts.SyncEachOp
	e.opts.SyncEachOp = true
	defer func() { e.opts.SyncEachOp = sync }()
	e.ResetStats()
	wall, err := e.greedyDecode(e.randomTokens(r, 1)[0], depth, n)
	if err != nil {
		return nil, err
	}
	per := func(d time.Duration) float64 { return float64(d) / 1e6 / float64(n) }
	b := &Breakdown{Tokens: n, Depth: depth, WallMS: per(wall), CopiesMS: per(e.Stats.Copies.Time)}
	rows := map[string]*OpTime{}
	var order []string
	for _, op := range c.g.Ops {
		name := layerPrefix.ReplaceAllString(op.Name, "")
		row := rows[name]
		if row == nil {
			row = &OpTime{Op: name, Kind: op.Kind.String(), Device: c.dev[op.ID].Name()}
			rows[name] = row
			order = append(order, name)
		} else if d := c.dev[op.ID].Name(); row.Device != d && row.Device != "several" {
			row.Device = "several"
		}
		row.PerStep++
		row.MS += per(e.Stats.Ops[op.Name])
		if op.Weight != nil && op.Kind == ops.MatMul {
			row.WeightBytes += op.Weight.Bytes()
		}
	}
	for _, name := range order {
		b.Ops = append(b.Ops, *rows[name])
	}
	sort.SliceStable(b.Ops, func(i, j int) bool { return b.Ops[i].MS > b.Ops[j].MS })
	return b, nil
}
