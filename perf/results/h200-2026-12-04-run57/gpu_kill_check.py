"""On the GPU: serve the committed GPU configs (tiny checkpoint, stop head zeroed), kill tritonserver
during a stream, and report how long its model processes and their GPU memory outlive it."""
import os, signal, subprocess, sys, threading, time
from pathlib import Path
REPO = Path.cwd()
sys.path[:0] = [str(REPO / "tests" / "server"), str(REPO)]
from tritonserver_process import start_server
from client.streaming import VoxCPMClient, VoxCPMError
from safetensors.torch import load_file, save_file
from voxcpm_triton.checkpoint.make import make_checkpoint
sys.path.insert(0, str(REPO / "tests" / "server"))
from test_server_killed import _children, _running

def gpu_mib():
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout
    return int(out.split()[0])

Path("/tmp/srv").mkdir(exist_ok=True)
folder = make_checkpoint(Path("/tmp/ckpt/voxcpm2-tiny"), "voxcpm2", size="tiny")
weights = load_file(folder / "model.safetensors"); weights["stop_head.weight"].zero_()
save_file(weights, folder / "model.safetensors")
print("GPU MiB before the server", gpu_mib(), flush=True)
t0 = time.time()
server = start_server(REPO / "model_repository", Path("/tmp/srv"), {"VOXCPM_CHECKPOINT": str(folder)},
                      config_name=None, ready_timeout_s=150)
print(f"ready after {time.time() - t0:.0f} s; GPU MiB {gpu_mib()}", flush=True)
stubs = _children(server.process.pid)
chunk, ended = threading.Event(), {}
def listen():
    try:
        for _ in VoxCPMClient(server.grpc_url, timeout_s=60).stream("A stream that will not end.", max_seconds=600):
            chunk.set()
        ended["how"] = "finished"
    except VoxCPMError as exc:
        ended["how"] = f"error: {str(exc)[:120]}"
threading.Thread(target=listen, daemon=True).start()
print("first chunk", chunk.wait(60), flush=True)
server.process.send_signal(signal.SIGKILL); server.process.wait(10); t1 = time.time()
for _ in range(60):
    live = [p for p in stubs if _running(p)]
    if not live: break
    time.sleep(0.25)
print(f"stubs {len(stubs)}, still running after {time.time() - t1:.1f} s: {len(live)}; stream: {ended}", flush=True)
time.sleep(1)
print("GPU MiB after", gpu_mib(), flush=True)
for p in stubs:
    if _running(p): os.kill(p, signal.SIGKILL)
