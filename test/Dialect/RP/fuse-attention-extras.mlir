// RUN: rp-opt %s -rp-fuse-attention -split-input-file | FileCheck %s

// Gemma 2's eager attention: the scale on the scores, the soft-cap
// tanh(s / 50) * 50, then a constant 0 / -big sliding-window mask (window
// 3 of 6 positions): one rp.attention with causal, window and softcap and
// no S x S mask operand left.
// CHECK-LABEL: func.func @gemma2_softcap_window
// CHECK-NOT: rp.softmax
// CHECK-NOT: rp.tanh
// CHECK: rp.attention %{{[^ ]+}}, %{{[^ ]+}}, %{{[^ ]+}} causal scale = 2.500000e-01 window = 3 softcap = 5.000000e+01 : (tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32>
// CHECK-NOT: rp.softmax
func.func @gemma2_softcap_window(%q: tensor<1x2x6x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32> {
  %scale = rp.constant dense<0.25> : tensor<f32>
  %cap = rp.constant dense<50.0> : tensor<f32>
  %mask = rp.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38],
                               [0.0, 0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38],
                               [0.0, 0.0, 0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38],
                               [-3.40282347E+38, 0.0, 0.0, 0.0, -3.40282347E+38, -3.40282347E+38],
                               [-3.40282347E+38, -3.40282347E+38, 0.0, 0.0, 0.0, -3.40282347E+38],
                               [-3.40282347E+38, -3.40282347E+38, -3.40282347E+38, 0.0, 0.0, 0.0]]]]> : tensor<1x1x6x6xf32>
  %s = rp.matmul %q, %k transpose_b : (tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x2x6x6xf32>
  %s1 = rp.mul %s, %scale : (tensor<1x2x6x6xf32>, tensor<f32>) -> tensor<1x2x6x6xf32>
  %s2 = rp.div %s1, %cap : (tensor<1x2x6x6xf32>, tensor<f32>) -> tensor<1x2x6x6xf32>
  %s3 = rp.tanh %s2 : tensor<1x2x6x6xf32>
  %s4 = rp.mul %s3, %cap : (tensor<1x2x6x6xf32>, tensor<f32>) -> tensor<1x2x6x6xf32>
  %s5 = rp.add %s4, %mask : (tensor<1x2x6x6xf32>, tensor<1x1x6x6xf32>) -> tensor<1x2x6x6xf32>
  %p = rp.softmax %s5 dim = 3 : tensor<1x2x6x6xf32>
  %o = rp.matmul %p, %v : (tensor<1x2x6x6xf32>, tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32>
  return %o : tensor<1x2x6x8xf32>
}

// -----

// The soft-cap's division written as a multiplication by 1 / cap, with
// the plain causal mask as where(keep, s, -inf).
// CHECK-LABEL: func.func @softcap_reciprocal_causal
// CHECK: rp.attention %{{[^ ]+}}, %{{[^ ]+}}, %{{[^ ]+}} causal scale = 1.000000e+00 softcap = 2.000000e+01 :
func.func @softcap_reciprocal_causal(%q: tensor<1x1x3x4xf32>, %k: tensor<1x1x3x4xf32>, %v: tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32> {
  %inv = rp.constant dense<0.05> : tensor<f32>
  %cap = rp.constant dense<20.0> : tensor<f32>
  %ninf = rp.constant dense<0xFF800000> : tensor<f32>
  %keep = rp.constant dense<[[true, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1>
  %s = rp.matmul %q, %k transpose_b : (tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>) -> tensor<1x1x3x3xf32>
  %s1 = rp.mul %s, %inv : (tensor<1x1x3x3xf32>, tensor<f32>) -> tensor<1x1x3x3xf32>
  %s2 = rp.tanh %s1 : tensor<1x1x3x3xf32>
  %s3 = rp.mul %cap, %s2 : (tensor<f32>, tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
  %s4 = rp.where %keep, %s3, %ninf : (tensor<3x3xi1>, tensor<1x1x3x3xf32>, tensor<f32>) -> tensor<1x1x3x3xf32>
  %p = rp.softmax %s4 dim = 3 : tensor<1x1x3x3xf32>
  %o = rp.matmul %p, %v : (tensor<1x1x3x3xf32>, tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32>
  return %o : tensor<1x1x3x4xf32>
}

// -----

// Causal with more keys than queries (the queries the last 2 of 5
// positions, a cache or token slicing): the bottom-right causal mask is the
// causal flag.
// CHECK-LABEL: func.func @bottom_right_causal
// CHECK: rp.attention %{{[^ ]+}}, %{{[^ ]+}}, %{{[^ ]+}} causal scale = 1.000000e+00 : (tensor<1x1x2x4xf32>, tensor<1x1x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<1x1x2x4xf32>
func.func @bottom_right_causal(%q: tensor<1x1x2x4xf32>, %k: tensor<1x1x5x4xf32>, %v: tensor<1x1x5x4xf32>) -> tensor<1x1x2x4xf32> {
  %ninf = rp.constant dense<0xFF800000> : tensor<f32>
  %keep = rp.constant dense<[[true, true, true, true, false], [true, true, true, true, true]]> : tensor<2x5xi1>
  %s = rp.matmul %q, %k transpose_b : (tensor<1x1x2x4xf32>, tensor<1x1x5x4xf32>) -> tensor<1x1x2x5xf32>
  %s1 = rp.where %keep, %s, %ninf : (tensor<2x5xi1>, tensor<1x1x2x5xf32>, tensor<f32>) -> tensor<1x1x2x5xf32>
  %p = rp.softmax %s1 dim = 3 : tensor<1x1x2x5xf32>
  %o = rp.matmul %p, %v : (tensor<1x1x2x5xf32>, tensor<1x1x5x4xf32>) -> tensor<1x1x2x4xf32>
  return %o : tensor<1x1x2x4xf32>
}

// -----

// Not a soft-cap (tanh(s / 30) * 50) nor a causal band (a top-left causal
// mask of 2 queries over 5 keys): left as they are, the mask as an
// operand.
// CHECK-LABEL: func.func @not_softcap
// CHECK: rp.tanh
// CHECK: rp.softmax
// CHECK-LABEL: func.func @top_left_is_a_mask
// CHECK: rp.attention %{{[^ ]+}}, %{{[^ ]+}}, %{{[^ ]+}} mask(%{{[^)]+}}) scale = 1.000000e+00 :
func.func @not_softcap(%q: tensor<1x1x3x4xf32>, %k: tensor<1x1x3x4xf32>, %v: tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32> {
  %c30 = rp.constant dense<30.0> : tensor<f32>
  %c50 = rp.constant dense<50.0> : tensor<f32>
  %s = rp.matmul %q, %k transpose_b : (tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>) -> tensor<1x1x3x3xf32>
  %s1 = rp.div %s, %c30 : (tensor<1x1x3x3xf32>, tensor<f32>) -> tensor<1x1x3x3xf32>
  %s2 = rp.tanh %s1 : tensor<1x1x3x3xf32>
  %s3 = rp.mul %s2, %c50 : (tensor<1x1x3x3xf32>, tensor<f32>) -> tensor<1x1x3x3xf32>
  %p = rp.softmax %s3 dim = 3 : tensor<1x1x3x3xf32>
  %o = rp.matmul %p, %v : (tensor<1x1x3x3xf32>, tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32>
  return %o : tensor<1x1x3x4xf32>
}

func.func @top_left_is_a_mask(%q: tensor<1x1x2x4xf32>, %k: tensor<1x1x5x4xf32>, %v: tensor<1x1x5x4xf32>) -> tensor<1x1x2x4xf32> {
  %ninf = rp.constant dense<0xFF800000> : tensor<f32>
  %keep = rp.constant dense<[[true, false, false, false, false], [true, true, false, false, false]]> : tensor<2x5xi1>
  %s = rp.matmul %q, %k transpose_b : (tensor<1x1x2x4xf32>, tensor<1x1x5x4xf32>) -> tensor<1x1x2x5xf32>
  %s1 = rp.where %keep, %s, %ninf : (tensor<2x5xi1>, tensor<1x1x2x5xf32>, tensor<f32>) -> tensor<1x1x2x5xf32>
  %p = rp.softmax %s1 dim = 3 : tensor<1x1x2x5xf32>
  %o = rp.matmul %p, %v : (tensor<1x1x2x5xf32>, tensor<1x1x5x4xf32>) -> tensor<1x1x2x4xf32>
  return %o : tensor<1x1x2x4xf32>
}

// -----

// rp.trace's scaled_dot_product_attention with transformers' sliding-window
// mask as an operand (a 0 / -inf constant, window 2 of 4): the causal flag
// and the window, no mask operand. A mask that is no causal band (the
// second, top-left over more keys) stays.
// CHECK-LABEL: func.func @sdpa_window_mask
// CHECK: rp.attention %{{[^ ]+}}, %{{[^ ]+}}, %{{[^ ]+}} causal scale = 5.000000e-01 window = 2 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK: rp.attention %{{[^ ]+}}, %{{[^ ]+}}, %{{[^ ]+}} mask(%{{[^)]+}}) :
func.func @sdpa_window_mask(%q: tensor<1x2x4x4xf32>, %k: tensor<1x2x4x4xf32>, %k6: tensor<1x2x6x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  %m = rp.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0xFF800000, 0.0, 0.0, 0xFF800000], [0xFF800000, 0xFF800000, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %o = rp.attention %q, %k, %k mask(%m) scale = 0.5 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %tl = rp.constant dense<[[true, false, false, false, false, false], [true, true, false, false, false, false], [true, true, true, false, false, false], [true, true, true, true, false, false]]> : tensor<4x6xi1>
  %o2 = rp.attention %q, %k6, %k6 mask(%tl) : (tensor<1x2x4x4xf32>, tensor<1x2x6x4xf32>, tensor<1x2x6x4xf32>, tensor<4x6xi1>) -> tensor<1x2x4x4xf32>
  return %o, %o2 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}
