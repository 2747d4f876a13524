"""Run 84: with VOXCPM_PROBE_EARLY=1, every cuBLASLt GEMM the engine captures whose chosen algorithm
was measured to wait (early_start.honours, tried when lt_gemm tunes the shape) becomes a programmatic
dependent of the kernel before it. Each shape's verdict and, at exit, what allow() did are appended
to $VOXCPM_PROBE_LOG. Without VOXCPM_PROBE_EARLY=1 nothing is patched."""

import os

if os.environ.get("VOXCPM_PROBE_EARLY", "0") == "1":
    import atexit
    import json

    import torch

    import early_start
    from voxcpm_triton.ops import lt_gemm

    _log_path = os.environ.get("VOXCPM_PROBE_LOG", "/tmp/early_probe.jsonl")

    def _log(record: dict) -> None:
        with open(_log_path, "a") as f:
            f.write(json.dumps(record) + "\n")

    _orig_run, _orig_tune, _orig_tune_add = lt_gemm._run, lt_gemm._tune, lt_gemm._tune_add

    def _run(plan, algo, x, *args, **kwargs):
        if getattr(plan, "early", False) and algo is plan.algo and torch.cuda.is_current_stream_capturing():
            early_start.allow(torch.cuda.current_stream(x.device).cuda_stream)
        return _orig_run(plan, algo, x, *args, **kwargs)

    def _tune(x, weight, bias):
        plan = _orig_tune(x, weight, bias)
        if plan.algo is not None:
            out = x.new_empty((x.shape[0], weight.shape[0]))
            plan.early = early_start.honours(lambda xx: (_orig_run(plan, plan.algo, xx, weight, bias, out), out)[1], x)
            _log({"shape": [x.shape[0], weight.shape[0], x.shape[1]], "add": False, "honours": plan.early})
        return plan

    def _tune_add(x, weight, out, scale):
        plan = _orig_tune_add(x, weight, out, scale)
        if plan.algo is not None:
            acc = out.clone()

            def run(xx):
                # late_copy's dependent must be the GEMM itself: acc is reset outside the graph
                _orig_run(plan, plan.algo, xx, weight, None, acc, scale, 0.0)
                return acc

            plan.early = early_start.honours(run, x)
            _log({"shape": [x.shape[0], weight.shape[0], x.shape[1]], "add": True, "honours": plan.early})
        return plan

    lt_gemm._run, lt_gemm._tune, lt_gemm._tune_add = _run, _tune, _tune_add
    atexit.register(lambda: _log({"pid": os.getpid(), "allow": dict(early_start.outcomes)}))
