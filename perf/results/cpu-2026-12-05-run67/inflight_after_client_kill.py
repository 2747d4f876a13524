"""A client killed after its first chunk: the ensemble in-flight count and pending counts for 30 s after its decoder slot came back."""
import re, signal, subprocess, sys, time
from pathlib import Path
sys.path.insert(0, "tests/server"); sys.path.insert(0, ".")
from safetensors.torch import load_file, save_file
from tritonserver_process import start_server
from voxcpm_triton.checkpoint.make import make_checkpoint
folder = Path("/tmp/ckpt_nostop/voxcpm2-tiny")
if not folder.exists():
    make_checkpoint(folder, "voxcpm2", size="tiny")
    w = load_file(folder / "model.safetensors"); w["stop_head.weight"].zero_(); save_file(w, str(folder / "model.safetensors"))
work = Path("/tmp/inflight_probe"); work.mkdir(exist_ok=True)
server = start_server(Path("model_repository").resolve(), work, {"VOXCPM_CHECKPOINT": str(folder)})
def pending():
    text = server.metrics()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r'nv_inference_pending_request_count\{model="(\w+)",version="1"\} ([0-9.]+)', text)}
code = ("import sys; sys.path.insert(0, '.'); from client.streaming import VoxCPMClient\n"
        f"for c in VoxCPMClient('{server.grpc_url}').stream('Many words to say here. ' * 12, max_seconds=600):\n"
        "    print('chunk', flush=True)\n")
client = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
client.stdout.readline()
print("pending while streaming:", pending())
client.send_signal(signal.SIGKILL); client.wait()
t0 = time.time()
print("idle:", server.wait_idle(timeout_s=30), f"after {time.time()-t0:.1f} s")
for i in range(6):
    print(f"+{time.time()-t0:.0f} s pending:", pending()); time.sleep(5)
t = time.time(); server.stop(); print(f"stopped in {time.time()-t:.1f} s")
print("\n".join(l for l in server.log().splitlines() if "in-flight" in l or "client gone" in l)[-1500:])
