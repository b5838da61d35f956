package runtime

import (
	"fmt"

	"hybrid/devices"
	_ "hybrid/devices/coreml" // registers the policy setting coreml_units, passed on as Options.CoreMLUnits
	"hybrid/devices/sim"
	"hybrid/models/llama"
	"hybrid/ops"
	"hybrid/planner"
)

// SessionOptions say how to set a model up on this machine's devices.
type SessionOptions struct {
	Policy   string // policy name or file; "" is cpu-only
	Hardware string // hardware profile (name or file) whose devices are simulated; "" for none
	Profile  string // measured cost profile file; "" for none
	Threads  int    // CPU threads per CPU device: 0 (every core) or 1..MaxThreads
	CPUs     int    // separate CPU devices ("cpu", "cpu:1", ...): 0..MaxCPUs
	// Context is the KV cache's positions: 0 is the model's context length,
	// and more than it needs ContextOverride (CheckContext).
	Context int
	// ContextOverride allows a Context past the model's context length, up
	// to MaxContext and this machine's memory.
	ContextOverride bool
	PerOp           bool // force the per-op transfer ablation
	// Conversions is the conversion design of the hardware profile's fp16
	// devices: "" or "boundary" (the default), or "per-op", the ablation in
	// which every op on such a device pays a conversion pass of each input
	// and output (sim.Conversions). It needs Hardware.
	Conversions string
	// CoreMLUnits is the compute units of the CoreML device's models; the
	// policy's coreml_units overrides it.
	CoreMLUnits string
	// Batch is the decode rows the plan is made for: a server's slots
	// (hybrid serve --parallel), whose decode steps run together, so that
	// placement can differ from one sequence's (mat-muls of several rows
	// cost more compute for the same weight reads). 0 or 1 is one sequence.
	// With more, only devices that run steps of several sequences
	// (devices.Info.Sequences) take part; the others are listed as missing.
	Batch int
	// MicroBatch is the executor's Options.MicroBatch: the tokens of each
	// micro-batch of a prompt pipelined across GPUs (0: DefaultMicroBatch,
	// negative: none).
	MicroBatch int
}

// Session is a model placed on devices by a policy: the plan for a decode
// step and an executor that runs it.
type Session struct {
	Model    *llama.Model
	Devices  []devices.Device
	Missing  []devices.Missing
	Hardware *sim.Hardware
	Policy   *planner.Policy
	Costs    *planner.Costs
	Plan     *planner.Plan // of a decode step (of Batch sequences)
	Exec     *Executor
	used     []devices.Device // the devices the decode plan uses: a prefill is planned on them
}

// Devices finds this machine's devices plus, with a hardware profile, its
// simulated devices. A profile describes a whole machine, so a real device
// of a kind the profile also has (its CPU) is left out: the plan is for that
// machine.
func Devices(o SessionOptions) ([]devices.Device, []devices.Missing, *sim.Hardware, error) {
	if err := checkDevices(o); err != nil {
		return nil, nil, nil, err
	}
	conv := sim.Boundary
	if o.Conversions != "" {
		c, err := sim.ParseConversions(o.Conversions)
		if err != nil {
			return nil, nil, nil, err
		}
		conv = c
	}
	if o.Hardware == "" && conv != sim.Boundary {
		return nil, nil, nil, fmt.Errorf("runtime: conversions %q applies to the simulated fp16 devices of a hardware profile, and none is given", o.Conversions)
	}
	devs, missing := devices.Discover(devices.Options{Threads: o.Threads, CPUs: o.CPUs, CoreMLUnits: o.CoreMLUnits})
	if o.Hardware == "" {
		return devs, missing, nil, nil
	}
	hw, err := sim.LoadHardware(o.Hardware)
	if err != nil {
		return nil, nil, nil, err
	}
	hw.SetConversions(conv)
	kinds := map[string]bool{}
	for _, s := range hw.Devices {
		kinds[s.Kind] = true
	}
	var kept []devices.Device
	for _, d := range devs {
		if kinds[d.Info().Kind] {
			d.Close()
			continue
		}
		kept = append(kept, d)
	}
	return append(kept, sim.Open(hw, o.Threads)...), missing, hw, nil
}

// NewSession places m on the devices by the policy and prepares to run it.
func NewSession(m *llama.Model, o SessionOptions) (*Session, error) {
	s := &Session{Model: m}
	ctx := o.Context
	if ctx == 0 {
		ctx = m.Config.Context
	}
	// Before any device is opened: the KV cache is sized from ctx.
	if err := CheckContext(m.Config, ctx, o.ContextOverride); err != nil {
		return nil, err
	}
	var err error
	name := o.Policy
	if name == "" {
		name = "cpu-only"
	}
	if s.Policy, err = planner.LoadPolicy(name); err != nil {
		return nil, err
	}
	if s.Policy.CoreMLUnits != "" {
		o.CoreMLUnits = s.Policy.CoreMLUnits
	}
	if s.Devices, s.Missing, s.Hardware, err = Devices(o); err != nil {
		return nil, err
	}
	if o.Batch < 0 || o.Batch > MaxSlots {
		return nil, fmt.Errorf("runtime: a batch of %d sequences: want 1..%d", o.Batch, MaxSlots)
	}
	if o.Batch > 1 {
		var keep []devices.Device
		for _, d := range s.Devices {
			if d.Info().Sequences {
				keep = append(keep, d)
				continue
			}
			s.Missing = append(s.Missing, devices.Missing{Kind: d.Info().Kind, Why: fmt.Sprintf("%s does not run steps of several sequences yet (needed for a batch of %d)", d.Name(), o.Batch)})
			d.Close()
		}
		s.Devices = keep
	}
	if o.PerOp {
		s.Policy.Transfers = "per-op"
	}
	infos := make([]devices.Info, len(s.Devices))
	for i, d := range s.Devices {
		infos[i] = d.Info()
	}
	why := map[string]string{}
	for _, mi := range s.Missing {
		why[mi.Kind] = mi.Why
	}
	if err := s.Policy.Check(infos, why); err != nil {
		return nil, err
	}
	costs := &planner.Costs{}
	if o.Profile != "" {
		if costs.Profile, err = planner.LoadProfile(o.Profile); err != nil {
			return nil, err
		}
	}
	s.Costs = costs.For(planner.Candidates(s.Devices))
	g, err := m.Graph(1, 0, ctx)
	if o.Batch > 1 {
		g, err = m.RowsGraph(o.Batch, ctx)
	}
	if err != nil {
		return nil, err
	}
	if s.Plan, err = planner.Make(g, planner.Candidates(s.Devices), s.Policy, s.Costs); err != nil {
		return nil, err
	}
	// Only the devices the plan uses take part.
	used := s.Plan.Placement()
	var devs []devices.Device
	for _, d := range s.Devices {
		if used[d.Name()] > 0 {
			devs = append(devs, d)
		}
	}
	s.used = devs
	opts := Options{
		Placement:  s.Plan.ByName(),
		PerOp:      s.Plan.PerOp,
		CopyTime:   s.Costs.CopyTime,
		MicroBatch: o.MicroBatch,
	}
	if !s.Plan.PerOp {
		// A prefill is planned for its own shape; the per-op ablation keeps
		// the naive placement.
		opts.PlaceStep = func(g *ops.Graph) ([]string, []string, error) {
			p, err := s.stepPlan(g)
			if err != nil {
				return nil, nil, err
			}
			return p.Device, p.Streamed, nil
		}
	}
	s.Exec, err = NewPlanExecutor(m, devs, ctx, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// stepPlan plans a prefill graph on the weights and KV cache the decode
// plan made resident, over the devices that plan uses (planner.MakeStep).
func (s *Session) stepPlan(g *ops.Graph) (*planner.Plan, error) {
	return planner.MakeStep(g, planner.Candidates(s.used), s.Policy, s.Costs, s.Plan)
}

// PlanFor returns the plan of a step of n tokens as the executor runs it: a
// prefill planned for its shape on the decode plan's resident weights
// (the per-op ablation: the decode placement applied to it), or the decode
// placement costed again.
func (s *Session) PlanFor(n int) (*planner.Plan, error) {
	g, err := s.Model.Graph(n, 0, s.Exec.Context())
	if err != nil {
		return nil, err
	}
	if n > 1 && !s.Plan.PerOp {
		return s.stepPlan(g)
	}
	assign, err := planner.Assign(s.Plan.ByName(), g)
	if err != nil {
		return nil, err
	}
	return planner.Apply(g, planner.Candidates(s.Devices), s.Policy, s.Costs, assign)
}

// Close releases every device.
func (s *Session) Close() {
	for _, d := range s.Devices {
		d.Close()
	}
}
