"""tritonserver RSS after 20 streams with 60 s of 48 kHz prompt audio, stopped after their first chunk by a bare gRPC cancel or by the client library (CANCEL_ID)."""
import queue, sys, time
from pathlib import Path
sys.path.insert(0, "tests/server"); sys.path.insert(0, ".")
import numpy as np
import tritonclient.grpc as grpcclient
from tritonserver_process import start_server
from safetensors.torch import load_file, save_file
from voxcpm_triton.checkpoint.make import make_checkpoint
if not Path("/tmp/ckpt_nostop/voxcpm2-tiny").exists():  # the tiny checkpoint, its stop head zeroed (never stops)
    folder = make_checkpoint(Path("/tmp/ckpt_nostop/voxcpm2-tiny"), "voxcpm2", size="tiny")
    weights = load_file(folder / "model.safetensors"); weights["stop_head.weight"].zero_()
    save_file(weights, str(folder / "model.safetensors"))
from client.streaming import VoxCPMClient, build_inputs
mode = sys.argv[1]
work = Path(f"/tmp/leak_{mode}"); work.mkdir(exist_ok=True)
server = start_server(Path("model_repository").resolve(), work, {"VOXCPM_CHECKPOINT": "/tmp/ckpt_nostop/voxcpm2-tiny"})
def rss():
    return int(Path(f"/proc/{server.process.pid}/status").read_text().split("VmRSS:")[1].split()[0]) // 1024
audio = (0.1 * np.random.default_rng(0).standard_normal(48000 * 60)).astype(np.float32)  # 60 s at 48 kHz, 11.5 MB
def one(i):
    inputs = build_inputs("Hello there, a few words.", prompt_audio=audio, prompt_sample_rate=48000, max_seconds=600)
    if mode == "cancel":
        replies = queue.Queue()
        c = grpcclient.InferenceServerClient(server.grpc_url)
        c.start_stream(callback=lambda result, error: replies.put((result, error)))
        c.async_stream_infer("voxcpm", inputs, request_id=f"r{i}", enable_empty_final_response=True)
        replies.get(timeout=120)
        c.stop_stream(cancel_requests=True); c.close()
    else:
        s = VoxCPMClient(server.grpc_url).stream_inputs(inputs); next(s); s.close()
try:
    one(-1); server.wait_idle(timeout_s=60); time.sleep(1)
    base = rss(); print(mode, "rss after warm-up", base, "MB", flush=True)
    for i in range(20):
        one(i)
    print("idle:", server.wait_idle(timeout_s=120)); time.sleep(2)
    print(mode, "rss after 20 more", rss(), "MB (+%d)" % (rss() - base), flush=True)
finally:
    server.stop()
print("\n".join(l for l in server.log().splitlines() if "in-flight inferences" in l)[-200:])
