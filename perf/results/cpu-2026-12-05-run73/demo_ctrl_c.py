import signal, subprocess, time, os
# Run from the repository root after: cp -r build/out/checkpoints/voxcpm2-tiny /tmp/ck && python -m perf.force_length /tmp/ck
log = open("/tmp/ctrlc.log", "w")
env = dict(os.environ, VOXCPM_CHECKPOINT="/tmp/ck", DEMO_MAX_SECONDS="30")
def reset():
    signal.signal(signal.SIGINT, signal.SIG_DFL); signal.signal(signal.SIGQUIT, signal.SIG_DFL)
p = subprocess.Popen(["bash", "build/demo.sh", "A rather long sentence so that the stream is still running, one two three four five six seven."],
                     cwd="/work/main", stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=reset, start_new_session=True)
while "first chunk after" not in open("/tmp/ctrlc.log").read():
    time.sleep(0.2)
time.sleep(0.05)
t = time.monotonic()
os.killpg(p.pid, signal.SIGINT)
rc = p.wait()
print(f"exit rc={rc} after {time.monotonic() - t:.1f} s", file=open("/tmp/ctrlc.res", "w"))
