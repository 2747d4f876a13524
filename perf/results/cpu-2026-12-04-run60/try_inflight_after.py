import sys, time, subprocess, signal
from pathlib import Path
sys.path.insert(0, "tests/server"); sys.path.insert(0, ".")
from tritonserver_process import start_server
folder = Path("/tmp/ckpt_nostop/voxcpm2-tiny")
server = start_server(Path("model_repository").resolve(), Path("/tmp/http_probe"), {"VOXCPM_CHECKPOINT": str(folder)})
code = ("import sys; sys.path.insert(0, '.'); from client.streaming import VoxCPMClient\n"
        f"for c in VoxCPMClient('{server.grpc_url}').stream('Many words to say here. ' * 12, max_seconds=600):\n"
        "    print('chunk', flush=True)\n")
client = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
client.stdout.readline()
client.send_signal(signal.SIGKILL); client.wait()
print("idle:", server.wait_idle(timeout_s=30))
time.sleep(2)
t = time.time()
server.stop()
print(f"stopped in {time.time()-t:.1f} s")
print("\n".join(l for l in server.log().splitlines() if "in-flight" in l or "client gone" in l or "xit" in l)[-1500:])
