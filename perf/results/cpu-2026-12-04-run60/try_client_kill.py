import sys, time, subprocess, signal
from pathlib import Path
sys.path.insert(0, "tests/server"); sys.path.insert(0, ".")
from tritonserver_process import start_server
folder = Path("/tmp/ckpt_nostop/voxcpm2-tiny")
if not folder.exists():
    from safetensors.torch import load_file, save_file
    from voxcpm_triton.checkpoint.make import make_checkpoint
    make_checkpoint(folder, "voxcpm2", size="tiny")
    w = load_file(folder / "model.safetensors"); w["stop_head.weight"].zero_(); save_file(w, folder / "model.safetensors")
server = start_server(Path("model_repository").resolve(), Path("/tmp/http_probe"), {"VOXCPM_CHECKPOINT": str(folder)})
try:
    code = ("import sys; sys.path.insert(0, '.'); from client.streaming import VoxCPMClient\n"
            f"for c in VoxCPMClient('{server.grpc_url}').stream('Many words to say here. ' * 12, max_seconds=600):\n"
            "    print('chunk', flush=True)\n")
    client = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    client.stdout.readline(); client.stdout.readline()
    t = time.time()
    print(f"kill at {t:.3f}", flush=True)
    client.send_signal(signal.SIGKILL); client.wait()
    for i in range(40):
        slots = server.live_slots()
        print(f"t+{time.time()-t:.1f}s live slots {slots}", flush=True)
        if slots == 0: break
        time.sleep(0.5)
finally:
    server.stop()
