// expected-error @+1 {{rp.weight_fingerprints must be a dictionary from weight file to ui64 fingerprint; re-run rp-import to write it}}
module attributes {rp.weight_fingerprints = "w.bin"} {
}

// -----

// expected-error @+1 {{rp.weight_fingerprints entry 'w.bin' must be a ui64 fingerprint; re-run rp-import to write it}}
module attributes {rp.weight_fingerprints = {"w.bin" = "0x1234"}} {
}

// -----

// expected-error @+1 {{rp.weight_fingerprints entry 'w.bin' must be a ui64 fingerprint; re-run rp-import to write it}}
module attributes {rp.weight_fingerprints = {"w.bin" = 5 : index}} {
}

// -----

// Without the attribute (rp.trace's IR, a hand-written one) nothing is
// checked, even a param whose file does not exist.
module {
  func.func @main() -> tensor<4xf32> {
    %w = rp.param "w" trainable at "no-such-file.bin"[0] : tensor<4xf32>
    return %w : tensor<4xf32>
  }
}
