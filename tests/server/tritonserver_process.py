"""Start and stop a real tritonserver for the server tests, the way build/tritonserver.sh does.

When pytest runs from build/out/venv (build/setup.sh's venv, as in CI), the server is started with
build/tritonserver.sh, which sets PATH, LD_LIBRARY_PATH, the backend directory and the python backend
stub and passes its arguments on to tritonserver. From any other venv holding nvidia-pytriton (a dev
venv) the same environment is assembled here from the interpreter running pytest, so the server's
models always run with the Python environment of the tests."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from perf.triton_metrics import fetch

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "build" / "tritonserver.sh"
SETUP_VENV = REPO / "build" / "out" / "venv"
# Python-backend shared memory: the default region names, and build/tritonserver.sh's voxcpm_<pid>_.
SHM_PATTERNS = ("triton_python_backend_shm_region*", "voxcpm_*_*")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _triton_home() -> Path:
    return Path(sysconfig.get_paths()["purelib"]) / "pytriton" / "tritonserver"


def _fallback_command(workdir: Path) -> tuple[list[str], dict[str, str]]:
    """tritonserver from this venv, with a backend folder holding the stub for this Python."""
    home = _triton_home()
    backends = workdir / "backends"
    shutil.copytree(home / "backends" / "python", backends / "python", ignore=shutil.ignore_patterns("__pycache__"))
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    stub = backends / "python" / "triton_python_backend_stub"
    shutil.copy2(home / "python_backend_stubs" / version / "triton_python_backend_stub", stub)
    stub.chmod(0o755)
    env = dict(os.environ)
    libs = [str(home.parent.parent / "nvidia_pytriton.libs"), sysconfig.get_config_var("LIBDIR")]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libs + [env.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)
    # The python backend runs models with the first python3 on PATH: this venv's.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return [str(home / "bin" / "tritonserver"), "--backend-directory", str(backends)], env


def live_shm_names() -> set[str]:
    """Names of /dev/shm files some live process has mapped."""
    names = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            text = maps.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if "/dev/shm/" in line:
                names.add(line.split("/dev/shm/", 1)[1].split(" ")[0])
    return names


def clean_stale_shm() -> None:
    """Remove python-backend shared memory left by killed servers (no live process maps it), and
    the cancel boards, window counters, decoded-window boards and voice folders
    (voxcpm_triton.serving.cancel_board, window_backlog, window_acks, voxcpm_triton.voice_cache) of
    servers no longer running."""
    live = live_shm_names()
    stale = [path for pattern in SHM_PATTERNS for path in Path("/dev/shm").glob(pattern)
             if path.name not in live and path.is_file()]
    for path in [path for kind in ("cancel", "backlog", "acks", "voices") for path in Path("/dev/shm").glob(f"voxcpm-{kind}-*")]:
        pid = path.name.split("-")[2].split(".")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            stale.append(path)
    for path in stale:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                path.unlink(missing_ok=True)
            except PermissionError:  # another user's, in the sticky /dev/shm: not ours to remove
                pass


@dataclass
class TritonServer:
    process: subprocess.Popen
    http_port: int
    grpc_port: int
    metrics_port: int
    log_path: Path

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metrics(self) -> str:
        return fetch(f"http://127.0.0.1:{self.metrics_port}/metrics")

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels`."""
        total, found = 0.0, False
        for line in self.metrics().splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            if all(f'{key}="{value}"' in line for key, value in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
                found = True
        if not found:
            raise KeyError(f"metric {name} with labels {labels} not exported")
        return total

    def live_slots(self) -> float:
        return self.metric("voxcpm_live_slots")

    def wait_idle(self, timeout_s: float = 30.0) -> float:
        """Poll the ar_decoder's live-slot gauge until it reads 0; returns the last value read."""
        deadline = time.monotonic() + timeout_s
        value = self.live_slots()
        while value and time.monotonic() < deadline:
            time.sleep(0.1)
            value = self.live_slots()
        return value

    def ready(self) -> bool:
        """The server's ready endpoint says so and its metrics endpoint answers: Triton starts the
        metrics service last, tens of ms after HTTP, and a test reading a gauge at once would meet a
        refused connection."""
        try:
            with urllib.request.urlopen(f"http://{self.http_url}/v2/health/ready", timeout=2) as reply:
                if reply.status != 200:
                    return False
            self.metrics()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        # The model processes follow the server out (orphan_guard) a moment later; until then they
        # map its shared memory (build/tritonserver.sh names it after the server's pid), which
        # would stay behind.
        prefix, deadline = f"voxcpm_{self.process.pid}_", time.monotonic() + 10.0
        while any(name.startswith(prefix) for name in live_shm_names()) and time.monotonic() < deadline:
            time.sleep(0.2)
        clean_stale_shm()


# Triton 2.51's Python backend at times aborts the whole server while model instances start
# ("terminate called after throwing an instance of 'boost::interprocess::lock_exception'"; open
# upstream: github.com/triton-inference-server/server/issues/8882). It happened once in a CI run,
# in the second of two servers started one after the other. Such a start is tried once more; any
# other failure to start is the test's.
STARTUP_ABORT = "boost::interprocess::lock_exception"


def start_server(
    model_repository: Path,
    workdir: Path,
    env_overrides: dict[str, str],
    config_name: str | None = "cpu",
    ready_timeout_s: float = 180.0,
    extra_args: tuple[str, ...] = (),
) -> TritonServer:
    clean_stale_shm()
    if LAUNCHER.is_file() and Path(sys.prefix).resolve() == SETUP_VENV.resolve():
        command, env = ["bash", str(LAUNCHER)], dict(os.environ)
    else:
        command, env = _fallback_command(workdir)
    env.update(env_overrides)
    ports = [free_port() for _ in range(3)]
    command += [
        "--model-repository", str(model_repository),
        "--http-address", "127.0.0.1", "--http-port", str(ports[0]),
        "--grpc-address", "127.0.0.1", "--grpc-port", str(ports[1]),
        "--metrics-address", "127.0.0.1", "--metrics-port", str(ports[2]),
        "--allow-metrics", "true", "--allow-cpu-metrics", "false", "--allow-gpu-metrics", "false",
        # Short: Triton 2.51 counts an ensemble request cancelled mid-stream as in flight forever.
        "--exit-timeout-secs", "5",
    ]
    if config_name is not None:  # None: each model's config.pbtxt (the GPU configs)
        command += ["--model-config-name", config_name]
    command += list(extra_args)
    log_path = workdir / "tritonserver.log"
    for attempt in (1, 2):
        with open(log_path, "w") as log_file:  # the server writes through its own copy of the descriptor
            process = subprocess.Popen(command, env=env, stdout=log_file, stderr=subprocess.STDOUT, cwd=workdir)
        server = TritonServer(process, *ports, log_path)
        if _became_ready(server, ready_timeout_s):
            return server
        exited = process.poll() is not None
        server.stop()
        log = server.log()
        if attempt == 2 or not exited or STARTUP_ABORT not in log:
            raise RuntimeError(f"tritonserver did not become ready; its log:\n{log[-6000:]}")
        log_path.rename(workdir / "tritonserver.aborted.log")


def _became_ready(server: TritonServer, timeout_s: float) -> bool:
    """Whether `server` answers ready before it exits or `timeout_s` runs out."""
    deadline = time.monotonic() + timeout_s
    while not server.ready():
        if server.process.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def perf_analyzer_command(workdir: Path) -> tuple[list[str], dict[str, str]]:
    """perf_analyzer of the tritonclient 2.51.0 wheel, with the two libraries it links (bundled by
    nvidia-pytriton under hashed names) given their sonames, as build/perf_analyzer.sh does."""
    if (REPO / "build" / "perf_analyzer.sh").is_file() and Path(sys.prefix).resolve() == SETUP_VENV.resolve():
        return ["bash", str(REPO / "build" / "perf_analyzer.sh")], dict(os.environ)
    libs = _triton_home().parent.parent / "nvidia_pytriton.libs"
    sonames = workdir / "lib"
    sonames.mkdir(exist_ok=True)
    for soname, pattern in (("libb64.so.0d", "libb64-*.so.0d"), ("libcudart.so.12", "libcudart-*.so.12*")):
        target = sorted(libs.glob(pattern))[0]
        link = sonames / soname
        if not link.exists():
            link.symlink_to(target)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join([str(sonames), env.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)
    return [str(Path(sys.executable).parent / "perf_analyzer")], env
