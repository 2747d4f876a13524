"""Experiment: add_rmsnorm / rmsnorm outputs of two kernel libraries, compared bit for bit."""
import subprocess, sys, os, torch
if len(sys.argv) == 3:  # driver: run each library in its own process, compare
    outs = []
    for lib in sys.argv[1:]:
        path = f"/tmp/norm_{len(outs)}.pt"
        subprocess.run([sys.executable, __file__, lib], check=True, env=dict(os.environ, VOXCPM_KERNELS_LIB=lib,
                                                                             NORM_OUT=path))
        outs.append(torch.load(path))
    same = sum(torch.equal(a, b) for a, b in zip(*outs))
    print(f"norm_bits: {same} of {len(outs[0])} outputs bit-identical")
    raise SystemExit(0 if same == len(outs[0]) else 1)
from voxcpm_triton import ops
results = []
for dtype in (torch.bfloat16, torch.float16, torch.float32):
    for hidden in (64, 200, 256, 1000, 1024, 2048, 4096):
        for rows in (1, 3, 22, 1408, 5632):
            g = torch.Generator(device="cuda").manual_seed(hidden * 7 + rows)
            x = torch.randn(rows, hidden, device="cuda", dtype=dtype, generator=g) * 3
            r = torch.randn(rows, hidden, device="cuda", dtype=dtype, generator=g)
            w = torch.rand(hidden, device="cuda", dtype=dtype, generator=g) + 0.5
            results.append(ops.rmsnorm(x, w, 1e-6).cpu())
            for scale in (1.0, 0.3):
                xx = x.clone()
                results.append(torch.ops.voxcpm.add_rmsnorm(xx, r, w, 1e-5, scale).cpu())
                results.append(xx.cpu())
torch.save(results, os.environ["NORM_OUT"])
