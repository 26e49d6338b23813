// Refusals of the typed schedule attributes (schedule-attrs.mlir).

// expected-error @+1 {{unknown partitioner 'greedy'; expected rp, roundpipe or exhaustive}}
func.func @bad_partitioner() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", partitioner = "greedy", forward = [], backward = [1]>}

// -----

// expected-error @+1 {{unknown recompute grain 'block'; expected stage, layer or auto}}
func.func @bad_grain() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", recompute = "block", forward = [], backward = [1]>}

// -----

// expected-error @+1 {{partitioner roundpipe cuts round-robin stages, not gpipe ones}}
func.func @roundpipe_static() attributes {rp.partition = #rp.partition<schedule = "gpipe", devices = 1, microbatches = 1, hw = "host", partitioner = "roundpipe", forward = [], backward = [1]>}

// -----

// expected-error @+1 {{needs a hardware profile: a shipped name or a JSON file}}
func.func @no_hw() attributes {rp.partition = #rp.partition<schedule = "gpipe", devices = 1, microbatches = 1, hw = "", forward = [], backward = [1]>}

