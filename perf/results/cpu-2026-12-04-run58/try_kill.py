import sys, time, threading, signal, os, subprocess
from pathlib import Path
sys.path.insert(0, "tests/server"); sys.path.insert(0, ".")
from tritonserver_process import start_server
from client.streaming import VoxCPMClient
folder = Path("/tmp/ckpt_nostop/voxcpm2-tiny")
server = start_server(Path("model_repository").resolve(), Path("/tmp/http_try"), {"VOXCPM_CHECKPOINT": str(folder)})
pid = server.process.pid
th = threading.Thread(target=lambda: list(VoxCPMClient(server.grpc_url, timeout_s=20).stream("Many words to say here. " * 12, seed=1, max_seconds=600)), daemon=True)
th.start(); time.sleep(1.5)
stubs = lambda: subprocess.run(["pgrep", "-f", f"triton_python_backend_stub.*voxcpm_{pid}_"], capture_output=True, text=True).stdout.split()
def alive(p):
    try:
        st = open(f"/proc/{p}/status").read()
        return "State:\tZ" not in st
    except FileNotFoundError:
        return False
print("stubs before", len(stubs()))
server.process.send_signal(signal.SIGKILL); server.process.wait()
for i in range(10):
    time.sleep(1)
    live = [p for p in stubs() if alive(p)]
    print(f"t+{i+1}s live stubs {len(live)}", [open(f"/proc/{p}/cmdline").read().split(chr(0))[1].split("/")[-3] for p in live], flush=True)
    if not live: break
for p in [p for p in stubs() if alive(p)]:
    name = open(f"/proc/{p}/cmdline").read().split(chr(0))[1].split("/")[-3]
    tasks = sorted(os.listdir(f"/proc/{p}/task"))
    info = []
    for t in tasks:
        comm = open(f"/proc/{p}/task/{t}/comm").read().strip()
        st = [l for l in open(f"/proc/{p}/task/{t}/status").read().splitlines() if l.startswith("State")][0]
        wchan = open(f"/proc/{p}/task/{t}/wchan").read().strip() if os.path.exists(f"/proc/{p}/task/{t}/wchan") else "?"
        info.append(f"{comm}:{st.split()[1]}:{wchan}")
    print(name, p, "threads", len(tasks), info[:40])
os.system("pkill -9 -f triton_python_backend_stub")
