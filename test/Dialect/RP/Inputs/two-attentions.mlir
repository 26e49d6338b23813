// Two causal attention layers over 12 tokens (the second with a sliding
// window of 5), a position table whose rows all differ (as RoPE's), two
// query heads over one key/value head: the model autodiff-token-slices.test
// differentiates sliced and unsliced.
module {
  func.func @main(%tokens: tensor<1x12xi64> {rp.name = "tokens"}) -> (tensor<1x12x32xf32> {rp.name = "logits"}) {
    %wte = rp.param "wte" trainable : tensor<32x16xf32>
    %x0 = rp.layer "embed" (%tokens, %wte) : (tensor<1x12xi64>, tensor<32x16xf32>) -> tensor<1x12x16xf32> {
    ^bb0(%t: tensor<1x12xi64>, %w: tensor<32x16xf32>):
      %e = rp.gather %w[%t] axis = 0 : (tensor<32x16xf32>, tensor<1x12xi64>) -> tensor<1x12x16xf32>
      rp.yield %e : tensor<1x12x16xf32>
    }
    %cos = rp.constant dense<[[0.9323, 0.7385, 0.4447, 0.0907, -0.2756, -0.6046, -0.8517, -0.9836], [0.7385, 0.0907, -0.6046, -0.9836, -0.8481, -0.269, 0.4508, 0.9348], [0.4447, -0.6046, -0.9823, -0.269, 0.743, 0.9298, 0.0839, -0.8552], [0.0907, -0.9836, -0.269, 0.9348, 0.4385, -0.8552, -0.5936, 0.7476], [-0.2756, -0.8481, 0.743, 0.4385, -0.9848, 0.1042, 0.9273, -0.6154], [-0.6046, -0.269, 0.9298, -0.8552, 0.1042, 0.7292, -0.9859, 0.4629], [-0.8517, 0.4508, 0.0839, -0.5936, 0.9273, -0.9859, 0.7521, -0.2952], [-0.9836, 0.9348, -0.8552, 0.7476, -0.6154, 0.4629, -0.2952, 0.1178], [-0.9823, 0.9298, -0.8445, 0.7292, -0.5881, 0.4263, -0.2493, 0.0635], [-0.8481, 0.4385, 0.1042, -0.6154, 0.9395, -0.9783, 0.7198, -0.2427], [-0.5991, -0.2821, 0.9372, -0.8408, 0.0703, 0.7566, -0.9768, 0.4139], [-0.269, -0.8552, 0.7292, 0.4629, -0.9783, 0.0635, 0.9441, -0.5715]]> : tensor<12x8xf32>
    %wqattn.0 = rp.param "attn.0.wq" trainable : tensor<16x16xf32>
    %wkattn.0 = rp.param "attn.0.wk" trainable : tensor<8x16xf32>
    %wvattn.0 = rp.param "attn.0.wv" trainable : tensor<8x16xf32>
    %woattn.0 = rp.param "attn.0.wo" trainable : tensor<16x16xf32>
    %x1 = rp.layer "attn.0" (%x0, %wqattn.0, %wkattn.0, %wvattn.0, %woattn.0, %cos) : (tensor<1x12x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<12x8xf32>) -> tensor<1x12x16xf32> {
    ^bb0(%x: tensor<1x12x16xf32>, %a: tensor<16x16xf32>, %b: tensor<8x16xf32>, %c: tensor<8x16xf32>, %d: tensor<16x16xf32>, %rc: tensor<12x8xf32>):
      %q = rp.matmul %x, %a transpose_b : (tensor<1x12x16xf32>, tensor<16x16xf32>) -> tensor<1x12x16xf32>
      %k = rp.matmul %x, %b transpose_b : (tensor<1x12x16xf32>, tensor<8x16xf32>) -> tensor<1x12x8xf32>
      %v = rp.matmul %x, %c transpose_b : (tensor<1x12x16xf32>, tensor<8x16xf32>) -> tensor<1x12x8xf32>
      %qr = rp.reshape %q : tensor<1x12x16xf32> to tensor<1x12x2x8xf32>
      %qt = rp.transpose %qr permutation = [0, 2, 1, 3] : tensor<1x12x2x8xf32> -> tensor<1x2x12x8xf32>
      %qc = rp.mul %qt, %rc : (tensor<1x2x12x8xf32>, tensor<12x8xf32>) -> tensor<1x2x12x8xf32>
      %kr = rp.reshape %k : tensor<1x12x8xf32> to tensor<1x12x1x8xf32>
      %kt = rp.transpose %kr permutation = [0, 2, 1, 3] : tensor<1x12x1x8xf32> -> tensor<1x1x12x8xf32>
      %kc = rp.mul %kt, %rc : (tensor<1x1x12x8xf32>, tensor<12x8xf32>) -> tensor<1x1x12x8xf32>
      %vr = rp.reshape %v : tensor<1x12x8xf32> to tensor<1x12x1x8xf32>
      %vt = rp.transpose %vr permutation = [0, 2, 1, 3] : tensor<1x12x1x8xf32> -> tensor<1x1x12x8xf32>
      %att = rp.attention %qc, %kc, %vt causal : (tensor<1x2x12x8xf32>, tensor<1x1x12x8xf32>, tensor<1x1x12x8xf32>) -> tensor<1x2x12x8xf32>
      %at = rp.transpose %att permutation = [0, 2, 1, 3] : tensor<1x2x12x8xf32> -> tensor<1x12x2x8xf32>
      %af = rp.reshape %at : tensor<1x12x2x8xf32> to tensor<1x12x16xf32>
      %o = rp.matmul %af, %d transpose_b : (tensor<1x12x16xf32>, tensor<16x16xf32>) -> tensor<1x12x16xf32>
      %y = rp.add %x, %o : (tensor<1x12x16xf32>, tensor<1x12x16xf32>) -> tensor<1x12x16xf32>
      rp.yield %y : tensor<1x12x16xf32>
    }
    %wqattn.1 = rp.param "attn.1.wq" trainable : tensor<16x16xf32>
    %wkattn.1 = rp.param "attn.1.wk" trainable : tensor<8x16xf32>
    %wvattn.1 = rp.param "attn.1.wv" trainable : tensor<8x16xf32>
    %woattn.1 = rp.param "attn.1.wo" trainable : tensor<16x16xf32>
    %x2 = rp.layer "attn.1" (%x1, %wqattn.1, %wkattn.1, %wvattn.1, %woattn.1, %cos) : (tensor<1x12x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<12x8xf32>) -> tensor<1x12x16xf32> {
    ^bb0(%x: tensor<1x12x16xf32>, %a: tensor<16x16xf32>, %b: tensor<8x16xf32>, %c: tensor<8x16xf32>, %d: tensor<16x16xf32>, %rc: tensor<12x8xf32>):
      %q = rp.matmul %x, %a transpose_b : (tensor<1x12x16xf32>, tensor<16x16xf32>) -> tensor<1x12x16xf32>
      %k = rp.matmul %x, %b transpose_b : (tensor<1x12x16xf32>, tensor<8x16xf32>) -> tensor<1x12x8xf32>
      %v = rp.matmul %x, %c transpose_b : (tensor<1x12x16xf32>, tensor<8x16xf32>) -> tensor<1x12x8xf32>
      %qr = rp.reshape %q : tensor<1x12x16xf32> to tensor<1x12x2x8xf32>
      %qt = rp.transpose %qr permutation = [0, 2, 1, 3] : tensor<1x12x2x8xf32> -> tensor<1x2x12x8xf32>
      %qc = rp.mul %qt, %rc : (tensor<1x2x12x8xf32>, tensor<12x8xf32>) -> tensor<1x2x12x8xf32>
      %kr = rp.reshape %k : tensor<1x12x8xf32> to tensor<1x12x1x8xf32>
      %kt = rp.transpose %kr permutation = [0, 2, 1, 3] : tensor<1x12x1x8xf32> -> tensor<1x1x12x8xf32>
      %kc = rp.mul %kt, %rc : (tensor<1x1x12x8xf32>, tensor<12x8xf32>) -> tensor<1x1x12x8xf32>
      %vr = rp.reshape %v : tensor<1x12x8xf32> to tensor<1x12x1x8xf32>
      %vt = rp.transpose %vr permutation = [0, 2, 1, 3] : tensor<1x12x1x8xf32> -> tensor<1x1x12x8xf32>
      %att = rp.attention %qc, %kc, %vt causal window = 5 : (tensor<1x2x12x8xf32>, tensor<1x1x12x8xf32>, tensor<1x1x12x8xf32>) -> tensor<1x2x12x8xf32>
      %at = rp.transpose %att permutation = [0, 2, 1, 3] : tensor<1x2x12x8xf32> -> tensor<1x12x2x8xf32>
      %af = rp.reshape %at : tensor<1x12x2x8xf32> to tensor<1x12x16xf32>
      %o = rp.matmul %af, %d transpose_b : (tensor<1x12x16xf32>, tensor<16x16xf32>) -> tensor<1x12x16xf32>
      %y = rp.add %x, %o : (tensor<1x12x16xf32>, tensor<1x12x16xf32>) -> tensor<1x12x16xf32>
      rp.yield %y : tensor<1x12x16xf32>
    }
    %wh = rp.param "head" trainable : tensor<32x16xf32>
    %l = rp.layer "head" (%x2, %wh) : (tensor<1x12x16xf32>, tensor<32x16xf32>) -> tensor<1x12x32xf32> {
    ^bb0(%h: tensor<1x12x16xf32>, %w: tensor<32x16xf32>):
      %m = rp.matmul %h, %w transpose_b : (tensor<1x12x16xf32>, tensor<32x16xf32>) -> tensor<1x12x32xf32>
      rp.yield %m : tensor<1x12x32xf32>
    }
    return %l : tensor<1x12x32xf32>
  }
}
