// rp-compile's messages: --help lists rp's own flags (--print-ir-on-error
// and --tf32 among them; LLVM's and MLIR's behind --help-hidden); an error
// names the op's location without dumping the IR (unless --print-ir-on-error
// or --mlir-print-op-on-diagnostic asks); the loss-choice error of a model
// with several outputs says why (a Hugging Face model's KV cache) and what to
// do (use_cache=False, or --loss=output:NAME).

// RUN: rp-compile --help | FileCheck %s --check-prefix=HELP
// RUN: rp-compile --help | FileCheck %s --check-prefix=FOREIGN
// RUN: rp-compile --help-hidden | FileCheck %s --check-prefix=HIDDEN
// RUN: not rp-compile %s -o %t.rpplan 2>&1 | FileCheck %s --check-prefix=LOSS
// RUN: not rp-compile %s -o %t.rpplan --mlir-print-op-on-diagnostic 2>&1 | FileCheck %s --check-prefix=ASKED

// HELP: --devices=
// HELP: --lora-rank=
// HELP: --print-ir-on-error
// HELP: --tf32
// FOREIGN-NOT: --mlir-
// FOREIGN-NOT: --print-ir-after
// FOREIGN-NOT: --print-ir-before
// FOREIGN-NOT: --debug
// HIDDEN: --mlir-print-op-on-diagnostic

// LOSS: error: the model has 2 outputs and cross-entropy needs one, the logits (outputs: logits past_key_values.0). A Hugging Face model returns its KV cache too unless traced or exported with use_cache=False (rp finetune does that); otherwise choose the loss with --loss=output:NAME
// LOSS-NOT: rp.layer
// LOSS-NOT: see current operation
// ASKED: see current operation

func.func @main(%x: tensor<2x8xf32>) -> (tensor<2x8xf32> {rp.name = "logits"}, tensor<2x8xf32> {rp.name = "past_key_values.0"}) {
  %y:2 = rp.layer "head" (%x) : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  ^bb0(%a: tensor<2x8xf32>):
    %t = rp.tanh %a : tensor<2x8xf32>
    rp.yield %a, %t : tensor<2x8xf32>, tensor<2x8xf32>
  }
  return %y#0, %y#1 : tensor<2x8xf32>, tensor<2x8xf32>
}
