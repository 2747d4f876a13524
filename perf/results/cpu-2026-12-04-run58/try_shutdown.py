import sys, time, threading, signal
from pathlib import Path
sys.path.insert(0, "tests/server"); sys.path.insert(0, ".")
from tritonserver_process import start_server
from client.streaming import VoxCPMClient
folder = Path("/tmp/ckpt_nostop/voxcpm2-tiny")
server = start_server(Path("model_repository").resolve(), Path("/tmp/http_try"), {"VOXCPM_CHECKPOINT": str(folder)})
result = {}
def run():
    t = time.time(); n = 0
    try:
        for x in VoxCPMClient(server.grpc_url, timeout_s=120).stream("Many words to say here. " * 12, seed=1, max_seconds=600):
            n += x.size
        result["ok"] = (n / 48000, time.time() - t)
    except Exception as e:
        result["err"] = (repr(e)[:300], n / 48000, time.time() - t)
th = threading.Thread(target=run); th.start()
time.sleep(1.5)
print("live", server.live_slots(), flush=True)
t = time.time()
server.process.send_signal(signal.SIGTERM)
try:
    server.process.wait(timeout=120)
    print(f"server exited after {time.time()-t:.1f}s rc={server.process.returncode}", flush=True)
except Exception as e:
    print("server still running", e)
th.join(60)
print("stream:", result, "thread alive:", th.is_alive())
print("\n".join(server.log().splitlines()[-15:]))
server.stop()
