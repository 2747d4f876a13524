"""How the ensemble request of a stream ends, per way of stopping it: the in-flight count a server stop reports."""
import queue, sys, time
from pathlib import Path
sys.path.insert(0, "tests/server"); sys.path.insert(0, ".")
import tritonclient.grpc as grpcclient
from tritonserver_process import start_server
from safetensors.torch import load_file, save_file
from voxcpm_triton.checkpoint.make import make_checkpoint
if not Path("/tmp/ckpt_nostop/voxcpm2-tiny").exists():  # the tiny checkpoint, its stop head zeroed (never stops)
    folder = make_checkpoint(Path("/tmp/ckpt_nostop/voxcpm2-tiny"), "voxcpm2", size="tiny")
    weights = load_file(folder / "model.safetensors"); weights["stop_head.weight"].zero_()
    save_file(weights, str(folder / "model.safetensors"))
from client.streaming import VoxCPMClient, build_inputs
folder = Path("/tmp/ckpt_nostop/voxcpm2-tiny")
mode = sys.argv[1]
work = Path(f"/tmp/inflight_probe_{mode}"); work.mkdir(exist_ok=True)
server = start_server(Path("model_repository").resolve(), work, {"VOXCPM_CHECKPOINT": str(folder)})
text = "Many words to say here. " * 12


def raw_stream(max_seconds: float, cancel: bool) -> None:
    """One stream over tritonclient itself: its first reply, then stop_stream(cancel_requests=cancel)."""
    replies = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: replies.put((result, error)))
    client.async_stream_infer("voxcpm", build_inputs(text, max_seconds=max_seconds), request_id="probe",
                              enable_empty_final_response=True)
    print("first reply:", replies.get(timeout=150)[1], flush=True)
    client.stop_stream(cancel_requests=cancel)
    client.close()


try:
    if mode == "bare_cancel":
        raw_stream(600, cancel=True)
    elif mode == "client_close":  # our client library: CANCEL_ID, then the ensemble ends normally
        stream = VoxCPMClient(server.grpc_url).stream(text, max_seconds=600)
        next(stream)
        stream.close()
    elif mode == "stream_closed_no_cancel":  # stop_stream waits for the request's own end
        raw_stream(3, cancel=False)
except BaseException:
    server.stop()
    raise
t0 = time.time()
print(mode, "idle:", server.wait_idle(timeout_s=40), f"after {time.time()-t0:.1f} s")
time.sleep(3)
t = time.time(); server.stop(); print(f"stopped in {time.time()-t:.1f} s")
print("\n".join(l for l in server.log().splitlines() if "in-flight inferences" in l or "client gone" in l)[-400:])
