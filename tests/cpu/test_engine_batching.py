"""Continuous batching changes nothing a stream produces, and the engine's bookkeeping (stop,
min/max length, budgets, windows, cancel, validation) behaves like the reference loop says."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from tests.cpu.engine_harness import make_request, run_to_completion
from tests.cpu.tiny_reference import tiny_config_dict
from voxcpm_triton.config import parse_config
from voxcpm_triton.engine.engine import Engine
from voxcpm_triton.engine.request import runaway_guard_max_len
from voxcpm_triton.model.voxcpm import build_model

BATCH_TOLERANCE = 1e-5  # fp32: only summation order may differ between batch compositions


def tiny_model(variant: str, seed: int = 0):
    torch.manual_seed(seed)
    model = build_model(parse_config(tiny_config_dict(variant))).eval()
    with torch.no_grad():
        model.stop_head.weight[1] = -model.stop_head.weight[0]  # stop fires on some steps, not all
    return model


@pytest.fixture(scope="module", params=["voxcpm2", "voxcpm0.5b"])
def model(request):
    return tiny_model(request.param)


def mixed_requests(model, count: int):
    """Requests that differ in text length, prompt mode, seed, cfg, timesteps and limits."""
    config = model.config
    gen = torch.Generator().manual_seed(42)
    requests = []
    for i in range(count):
        text = torch.randint(110, config.lm.vocab_size, (3 + 2 * i,), generator=gen)
        prompt = torch.randn(2 + i, config.patch_size, config.feat_dim, generator=gen) if i % 3 == 1 else None
        ref = (torch.randn(3, config.patch_size, config.feat_dim, generator=gen)
               if i % 3 == 2 and config.is_v2 else None)
        requests.append(make_request(model, f"s{i}", text, ref, prompt, min_len=i % 4, max_len=5 + 2 * i,
                                     seed=1000 + i, cfg_value=1.5 + 0.25 * (i % 3), timesteps=(10, 6)[i % 2]))
    return requests


def engine_for(model, slots=8, window=4):
    return Engine(model, max_slots=slots, max_context=model.config.max_length, device="cpu", window_patches=window)


def test_stream_alone_equals_stream_in_batch_of_8(model):
    batch = run_to_completion(engine_for(model), mixed_requests(model, 8))
    for i in (0, 3, 5, 7):
        alone = run_to_completion(engine_for(model, slots=1), [mixed_requests(model, 8)[i]])[f"s{i}"]
        together = batch[f"s{i}"]
        assert alone.shape == together.shape
        assert np.abs(alone - together).max() <= BATCH_TOLERANCE


def test_late_admission_and_slot_reuse_do_not_change_streams(model):
    """Streams that join mid-way, and slots reused after others finished, give the same patches."""
    requests = mixed_requests(model, 6)
    expected = {r.request_id: run_to_completion(engine_for(model, slots=1), [r])[r.request_id]
                for r in mixed_requests(model, 6)}
    engine = engine_for(model, slots=3)
    got: dict[str, list[np.ndarray]] = {r.request_id: [] for r in requests}
    pending = list(requests)
    finished = set()
    engine.submit(pending.pop(0))
    while len(finished) < len(requests):
        if pending:
            engine.submit(pending.pop(0))  # a new arrival every step, more than the 3 slots hold
        for output in engine.step():
            got[output.request_id].append(output.window[-1])
            finished |= {output.request_id} if output.finished else set()
        assert engine.live_slots <= 3
    for rid, patches in got.items():
        assert np.abs(np.stack(patches) - expected[rid]).max() <= BATCH_TOLERANCE


def test_stop_obeys_min_len_and_emits_the_stop_patch():
    model = tiny_model("voxcpm2")
    with torch.no_grad():  # stop head always fires
        model.stop_head.weight.zero_()
        model.stop_head.weight[1, 0] = 1.0
        model.stop_proj.weight.zero_()
        model.stop_proj.bias.fill_(5.0)
    text = [120, 130, 140]
    for min_len in (0, 2, 5):
        out = run_to_completion(engine_for(model), [make_request(model, "a", text, min_len=min_len, max_len=50)])
        # Reference loop: patch i is emitted, then it breaks if stop and i > min_len.
        assert out["a"].shape[0] == min_len + 2


def test_max_len_runaway_guard_and_context_cap():
    model = tiny_model("voxcpm2")
    with torch.no_grad():  # stop head never fires
        model.stop_head.weight.zero_()
        model.stop_head.weight[0, 0] = 1.0
        model.stop_proj.weight.zero_()
        model.stop_proj.bias.fill_(5.0)
    text = [120, 130]
    out = run_to_completion(engine_for(model), [make_request(model, "a", text, max_len=7)])
    assert out["a"].shape[0] == 7
    guarded = make_request(model, "b", text, target_text_tokens=2)
    assert runaway_guard_max_len(2) == 22
    assert run_to_completion(engine_for(model), [guarded])["b"].shape[0] == 22
    assert runaway_guard_max_len(2, requested=9) == 9
    # prompt of 3 positions (2 tokens + audio start) in a 16-row context: 13 rows left to write
    small = Engine(model, max_slots=2, max_context=16, device="cpu", window_patches=2)
    assert run_to_completion(small, [make_request(model, "c", text)])["c"].shape[0] == 13


def test_windows_hold_context_then_new_patch(model):
    config = model.config
    prompt = torch.randn(5, config.patch_size, config.feat_dim, generator=torch.Generator().manual_seed(1))
    request = make_request(model, "w", [120, 121], None, prompt, min_len=10, max_len=6)
    context = request.context_patches.numpy()
    engine = engine_for(model, window=3)
    engine.submit(request)
    windows = []
    while engine.has_work:
        windows += [o.window for o in engine.step()]
    assert [w.shape[0] for w in windows] == [3] * 6
    np.testing.assert_array_equal(windows[0][:2], context[-2:])
    np.testing.assert_array_equal(windows[1][:2], np.stack([context[-1], windows[0][-1]]))
    for previous, current in zip(windows, windows[1:]):
        np.testing.assert_array_equal(current[:-1], previous[1:])


def test_cancel_frees_slot_and_reports_once(model):
    engine = engine_for(model, slots=2)
    requests = mixed_requests(model, 3)
    for request in requests:
        request.max_len, request.min_len = 30, 30
        engine.submit(request)
    engine.step()
    assert engine.live_slots == 2
    assert engine.cancel("s0") and engine.cancel("s2")  # one running, one still queued
    assert not engine.cancel("nope")
    outputs = engine.step()
    cancelled = [o for o in outputs if o.error == "cancelled"]
    assert sorted(o.request_id for o in cancelled) == ["s0", "s2"]
    assert all(o.finished and o.window.shape[0] == 0 for o in cancelled)
    assert engine.live_slots == 1
    assert {o.request_id for o in engine.step()} == {"s1"}


def test_submit_is_thread_safe(model):
    engine = engine_for(model, slots=8)
    requests = mixed_requests(model, 8)
    threads = [threading.Thread(target=engine.submit, args=(r,)) for r in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outputs = engine.step()
    assert sorted(o.request_id for o in outputs) == sorted(r.request_id for r in requests)


@pytest.mark.parametrize(
    "change,message",
    [(dict(cfg_value=float("nan")), "cfg_value"), (dict(timesteps=0), "timesteps"), (dict(max_len=0), "max_len"),
     (dict(min_len=-1), "min_len"), (dict(seed=-3), "seed"), (dict(request_id=""), "request_id"),
     (dict(tokens=torch.tensor([1, 2, 99999, 101])), "tokens"), (dict(tokens=torch.tensor(120)), "tokens"),
     (dict(target_text_tokens=-1), "target_text_tokens"),
     (dict(feats=torch.zeros(4, 1, 1)), "feats"), (dict(context_patches=torch.zeros(2, 3)), "context_patches")],
)
def test_submit_rejects_bad_requests(model, change, message):
    request = make_request(model, "bad", [120, 121, 122])
    for key, value in change.items():
        setattr(request, key, value)
    with pytest.raises(ValueError, match=message):
        engine_for(model).submit(request)


def test_duplicate_request_id_is_rejected(model):
    engine = engine_for(model)
    engine.submit(make_request(model, "dup", [120]))
    with pytest.raises(ValueError, match="already"):
        engine.submit(make_request(model, "dup", [121]))


def test_bfloat16_engine_runs_and_stays_close_to_float32_on_the_first_patch():
    model32 = tiny_model("voxcpm2")
    model16 = tiny_model("voxcpm2").to(torch.bfloat16)
    assert model16.base_lm.rope.cos_table.dtype == torch.bfloat16  # cast like the reference's buffers
    request = lambda: make_request(model32, "x", [120, 121, 122], min_len=3, max_len=5, seed=9)
    out32 = run_to_completion(engine_for(model32), [request()])["x"]
    out16 = run_to_completion(engine_for(model16), [request()])["x"]
    assert np.isfinite(out16).all() and out16.shape[1:] == out32.shape[1:]
    assert engine_for(model16).runner.base_cache.k.dtype == torch.bfloat16
    # Same noise draw and weights: the first patch differs only by bf16 rounding.
    assert np.abs(out16[0] - out32[0]).max() <= 0.1 * np.abs(out32[0]).max()


def test_prefill_budget_spreads_admissions_without_changing_streams(model):
    requests = mixed_requests(model, 4)  # prompt lengths grow with the index
    lengths = [r.prompt_length for r in requests]
    budget = lengths[0] + lengths[1]
    engine = Engine(model, max_slots=8, max_context=model.config.max_length, device="cpu", window_patches=4,
                    max_prefill_tokens=budget)
    for request in requests:
        engine.submit(request)
    admitted_per_step = []
    got: dict[str, list[np.ndarray]] = {r.request_id: [] for r in requests}
    while engine.has_work:
        before = engine.live_slots + len(engine.scheduler.queue)
        outputs = engine.step()
        admitted_per_step.append(sum(1 for o in outputs if o.patch_index == 0))
        for output in outputs:
            got[output.request_id].append(output.window[-1])
        assert before >= engine.live_slots
    assert admitted_per_step[0] == 2 and sum(admitted_per_step) == 4
    alone = run_to_completion(engine_for(model), mixed_requests(model, 4))
    for rid, patches in got.items():
        assert np.abs(np.stack(patches) - alone[rid]).max() <= BATCH_TOLERANCE


def test_a_failing_prefill_ends_only_the_admitted_streams(model):
    engine = engine_for(model, slots=4)
    first, second = mixed_requests(model, 2)
    first.min_len = first.max_len = 20
    engine.submit(first)
    engine.step()
    real_prefill = engine.runner.prefill

    def broken(streams):
        raise RuntimeError("device fell over")

    engine.runner.prefill = broken
    engine.submit(second)
    outputs = {o.request_id: o for o in engine.step()}
    assert outputs["s1"].finished and "prefill failed: device fell over" in outputs["s1"].error
    assert outputs["s0"].error is None and not outputs["s0"].finished
    assert engine.live_slots == 1
    engine.runner.prefill = real_prefill
    engine.submit(mixed_requests(model, 2)[1])  # the slot and the request id are free again
    assert {o.request_id for o in engine.step()} == {"s0", "s1"}
