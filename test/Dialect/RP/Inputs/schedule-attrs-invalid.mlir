// Refusals of the typed schedule attributes (schedule-attrs.mlir).

// expected-error @+1 {{unknown partitioner 'greedy'; expected rp, roundpipe or exhaustive}}
func.func @bad_partitioner() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", partitioner = "greedy", forward = [], backward = [1]>}

// -----

// expected-error @+1 {{unknown recompute grain 'block'; expected stage, layer or auto}}
func.func @bad_grain() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", recompute = "block", forward = [], backward = [1]>}

// -----

// expected-error @+1 {{recompute lists 3 grains but there are 2 backward stages after the tail; give one grain per backward stage, or one for all}}
func.func @grain_count() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "host", recompute = ["layer", "stage", "layer"], forward = [2, 2], backward = [1, 2, 2]>}

// -----

// expected-error @+1 {{a per-stage recompute list holds chosen grains, stage or layer; give "auto" alone to have rp-choose-recompute choose them}}
func.func @grain_auto() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "host", recompute = ["auto", "layer"], forward = [2, 2], backward = [1, 2, 2]>}

// -----

// expected-error @+1 {{partitioner roundpipe cuts round-robin stages, not gpipe ones}}
func.func @roundpipe_static() attributes {rp.partition = #rp.partition<schedule = "gpipe", devices = 1, microbatches = 1, hw = "host", partitioner = "roundpipe", forward = [], backward = [1]>}

// -----

// expected-error @+1 {{needs a hardware profile: a shipped name or a JSON file}}
func.func @no_hw() attributes {rp.partition = #rp.partition<schedule = "gpipe", devices = 1, microbatches = 1, hw = "", forward = [], backward = [1]>}


// -----

// expected-error @+1 {{tail_jobs must be 1 or 2, not 3}}
func.func @three_tail_jobs() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "host", tail_jobs = 3, forward = [1], backward = [1, 1]>}

// -----

// expected-error @+1 {{tail_jobs = 2 takes alternate microbatches (or token slices) of a round-robin schedule, so it needs round-robin}}
func.func @static_tail_jobs() attributes {rp.partition = #rp.partition<schedule = "1f1b", devices = 2, microbatches = 3, hw = "host", tail_jobs = 2, forward = [1], backward = [1, 1]>}
