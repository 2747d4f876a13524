"""lt_cache's file and lt_gemm's use of it, with cuBLASLt's calls replaced: an algorithm here is an
lt_gemm._Algo whose words hold its configuration's fields, so building and decoding are exact."""

from __future__ import annotations

import json
import multiprocessing
import os
from dataclasses import astuple, replace

import pytest
import torch

from voxcpm_triton.ops import lt_cache, lt_gemm, lt_search
from voxcpm_triton.ops.lt_search import Config
from voxcpm_triton.serving import model_settings

KEY = (0, 1408, 1024, 4096, torch.bfloat16, False, "add")
HEURISTIC = Config(algo_id=66, tile=1, split_k=1, reduction=0, swizzle=0, custom=0, stages=35, inner=0, cluster=5)
FOUND = (replace(HEURISTIC, tile=4, cluster=2), replace(HEURISTIC, custom=3))


def _algo(config: Config) -> lt_gemm._Algo:
    algo = lt_gemm._Algo()
    *fields, inner, cluster = astuple(config)
    algo.data[:] = [*fields, inner << 16 | cluster]
    return algo


def _decode(algo: lt_gemm._Algo) -> Config:
    *fields, last = (int(word) for word in algo.data)
    return Config(*fields, inner=last >> 16, cluster=last & 0xFFFF)


@pytest.fixture(autouse=True)
def cache_file(tmp_path, monkeypatch):
    file = tmp_path / "tuning" / "lt.json"
    monkeypatch.setenv("VOXCPM_LT_CACHE", str(file))
    monkeypatch.setenv("VOXCPM_LT_CACHE_SEED", "")  # tests that want a seed write their own
    monkeypatch.setattr(lt_cache, "section", lambda device: "H200 sm90 cuBLASLt 130100")
    return file


@pytest.fixture
def seed_file(tmp_path, monkeypatch):
    """A seed holding KEY's entry from a 30 s search."""
    file = tmp_path / "seed.json"
    file.write_text(json.dumps({"H200 sm90 cuBLASLt 130100": {"1408x1024x4096 bfloat16 add": {
        "seconds": 30.0, "configs": [list(astuple(config)) for config in FOUND[1:]]}}}))
    monkeypatch.setenv("VOXCPM_LT_CACHE_SEED", str(file))
    return file


def test_an_entry_reads_back_and_others_are_kept(cache_file, monkeypatch):
    lt_cache.record(torch.device("cpu"), KEY, lt_cache.Entry(0.5, FOUND))
    other = (0, 64, 2560, 2048, torch.bfloat16, True)
    lt_cache.record(torch.device("cpu"), other, lt_cache.Entry(2.0, FOUND[:1]))
    monkeypatch.setattr(lt_cache, "section", lambda device: "L40S sm89 cuBLASLt 130100")
    lt_cache.record(torch.device("cpu"), KEY, lt_cache.Entry(1.0, FOUND[1:]))
    data = json.loads(cache_file.read_text())
    assert data["H200 sm90 cuBLASLt 130100"].keys() == {"1408x1024x4096 bfloat16 add", "64x2560x2048 bfloat16 bias"}
    assert lt_cache.lookup(torch.device("cpu"), KEY) == lt_cache.Entry(1.0, FOUND[1:])
    monkeypatch.setattr(lt_cache, "section", lambda device: "H200 sm90 cuBLASLt 130100")
    assert lt_cache.lookup(torch.device("cpu"), KEY) == lt_cache.Entry(0.5, FOUND)
    assert lt_cache.lookup(torch.device("cpu"), other) == lt_cache.Entry(2.0, FOUND[:1])


def test_no_variable_no_file(cache_file, monkeypatch):
    monkeypatch.setenv("VOXCPM_LT_CACHE", "")
    lt_cache.record(torch.device("cpu"), KEY, lt_cache.Entry(0.5, FOUND))
    assert lt_cache.lookup(torch.device("cpu"), KEY) is None
    assert not cache_file.parent.exists()


def test_the_seed_serves_a_shape_until_the_file_has_a_longer_walk(cache_file, seed_file, monkeypatch):
    from_seed = lt_cache.Entry(30.0, FOUND[1:])
    assert lt_cache.lookup(torch.device("cpu"), KEY) == from_seed
    lt_cache.record(torch.device("cpu"), KEY, lt_cache.Entry(0.5, FOUND))
    assert lt_cache.lookup(torch.device("cpu"), KEY) == from_seed
    lt_cache.record(torch.device("cpu"), KEY, lt_cache.Entry(60.0, FOUND))
    assert lt_cache.lookup(torch.device("cpu"), KEY) == lt_cache.Entry(60.0, FOUND)
    assert "60.0" not in seed_file.read_text()  # the seed is never written
    monkeypatch.setenv("VOXCPM_LT_CACHE", "")  # no cache file: the seed alone
    assert lt_cache.lookup(torch.device("cpu"), KEY) == from_seed
    monkeypatch.setattr(lt_cache, "section", lambda device: "L40S sm89 cuBLASLt 130100")
    assert lt_cache.lookup(torch.device("cpu"), KEY) is None


def test_the_shipped_seed_parses_and_holds_the_searched_down_projection(monkeypatch):
    monkeypatch.delenv("VOXCPM_LT_CACHE_SEED")
    assert lt_cache.seed_path() == lt_cache.SEED
    data = json.loads(lt_cache.SEED.read_text())
    for section, shapes in data.items():
        for shape in shapes:
            entry = lt_cache.parse(data, section, shape)
            assert entry is not None and entry.seconds > 0 and entry.configs, (section, shape)
            m, n, k = shape.split(" ")[0].split("x")
            add = ["add"] if shape.endswith(" add") else []
            key = (0, int(m), int(n), int(k), torch.bfloat16, shape.endswith(" bias"), *add)
            assert lt_cache.shape_name(key) == shape  # the engine would look it up under this name
    monkeypatch.setattr(lt_cache, "section", lambda device: "NVIDIA H200 sm90 cuBLASLt 130100")
    entry = lt_cache.lookup(torch.device("cpu"), KEY)
    assert entry.seconds >= 30 and Config(66, 401, 1, 0, 0, 5, 35, 0, 2) in entry.configs  # run 64's 17.5 us


def test_an_unreadable_file_is_ignored_then_replaced(cache_file):
    cache_file.parent.mkdir()
    cache_file.write_text("{ half a file")
    with pytest.warns(UserWarning, match="unreadable"):
        assert lt_cache.lookup(torch.device("cpu"), KEY) is None
    with pytest.warns(UserWarning, match="unreadable"):
        lt_cache.record(torch.device("cpu"), KEY, lt_cache.Entry(0.5, FOUND))
    assert lt_cache.lookup(torch.device("cpu"), KEY) == lt_cache.Entry(0.5, FOUND)


def test_a_file_that_cannot_be_written_warns_and_the_warm_up_goes_on(tmp_path, monkeypatch):
    blocker = tmp_path / "not a folder"
    blocker.write_text("")
    monkeypatch.setenv("VOXCPM_LT_CACHE", str(blocker / "lt.json"))
    with pytest.warns(UserWarning, match="could not write"):
        lt_cache.record(torch.device("cpu"), KEY, lt_cache.Entry(0.5, FOUND))


def test_a_malformed_entry_counts_as_absent(cache_file):
    cache_file.parent.mkdir()
    cache_file.write_text(json.dumps({"H200 sm90 cuBLASLt 130100": {"1408x1024x4096 bfloat16 add": {
        "seconds": 0.5, "configs": [[66, 1, 1]]}}}))
    assert lt_cache.lookup(torch.device("cpu"), KEY) is None


def _write_many(first: int) -> None:
    for m in range(first, first + 25):
        lt_cache.record(torch.device("cpu"), (0, m, 1024, 4096, torch.bfloat16, False), lt_cache.Entry(0.5, FOUND))


def test_processes_writing_at_once_lose_no_entry(cache_file):
    context = multiprocessing.get_context("fork")  # inherits the patched section and the variable
    workers = [context.Process(target=_write_many, args=(first,)) for first in (1000, 2000)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [worker.exitcode for worker in workers] == [0, 0]
    assert len(json.loads(cache_file.read_text())["H200 sm90 cuBLASLt 130100"]) == 50


class FakeCublasLt:
    """build, check and decode on _Algo words; walk records how it was called and returns FOUND."""

    def __init__(self, monkeypatch):
        self.walks: list[tuple[list[Config], float]] = []
        self.refused: set[Config] = set()
        monkeypatch.setattr(lt_search, "decode", _decode)
        monkeypatch.setattr(lt_search, "build", lambda config, dtype, device: _algo(config))
        monkeypatch.setattr(lt_search, "check", lambda plan, algo, device: _decode(algo) not in self.refused)
        monkeypatch.setattr(lt_search, "walk", self.walk)
        monkeypatch.setattr(lt_search, "_spent_s", 0.0)

    def walk(self, plan, starts, runner, dtype, device, seconds):
        self.walks.append(([_decode(algo) for algo in starts], seconds))
        return [_algo(config) for config in FOUND]

    @staticmethod
    def searched(rows: int = 1408) -> list[Config]:
        like = torch.empty(rows, 8, dtype=torch.bfloat16)
        return [_decode(algo) for algo in lt_gemm._searched(None, [_algo(HEURISTIC)], None, like, KEY)]


@pytest.fixture
def cublaslt(monkeypatch):
    monkeypatch.setenv("VOXCPM_LT_SEARCH_S", "0.5")
    return FakeCublasLt(monkeypatch)


def test_the_first_process_walks_and_writes_the_next_reuses(cublaslt):
    assert cublaslt.searched() == [HEURISTIC, *FOUND]
    assert cublaslt.walks == [([HEURISTIC], 0.5)]
    assert lt_cache.lookup(torch.device("cpu"), KEY) == lt_cache.Entry(0.5, FOUND)
    assert cublaslt.searched() == [HEURISTIC, *FOUND]
    assert len(cublaslt.walks) == 1


def test_a_longer_walk_than_the_entry_had_walks_again_from_its_configurations(cublaslt, monkeypatch):
    cublaslt.searched()
    monkeypatch.setenv("VOXCPM_LT_SEARCH_S", "5")
    cublaslt.searched()
    assert cublaslt.walks[1] == ([HEURISTIC, *FOUND], 5.0)
    assert lt_cache.lookup(torch.device("cpu"), KEY).seconds == 5.0
    monkeypatch.setenv("VOXCPM_LT_SEARCH_S", "0.5")  # a shorter ask is served by the longer walk
    cublaslt.searched()
    assert len(cublaslt.walks) == 2


def test_a_seeded_shape_is_not_walked(cublaslt, seed_file, cache_file):
    assert cublaslt.searched() == [HEURISTIC, *FOUND[1:]]
    assert not cublaslt.walks and not cache_file.exists()


def test_configurations_cublaslt_no_longer_accepts_are_dropped(cublaslt):
    cublaslt.searched()
    cublaslt.refused.add(FOUND[0])
    assert cublaslt.searched() == [HEURISTIC, FOUND[1]]
    assert len(cublaslt.walks) == 1
    cublaslt.refused.add(FOUND[1])  # none left: the shape is walked again
    cublaslt.searched()
    assert len(cublaslt.walks) == 2


def test_no_walk_asked_leaves_the_heuristic_list_and_the_file_alone(cublaslt, cache_file, monkeypatch):
    monkeypatch.setenv("VOXCPM_LT_SEARCH_S", "0")
    assert cublaslt.searched() == [HEURISTIC]
    assert cublaslt.searched(rows=lt_search.MIN_ROWS - 1) == [HEURISTIC]
    assert not cublaslt.walks and not cache_file.exists()


def test_with_the_process_budget_spent_an_entry_from_a_shorter_walk_still_serves(cublaslt, monkeypatch):
    cublaslt.searched()
    monkeypatch.setenv("VOXCPM_LT_SEARCH_S", "5")
    monkeypatch.setattr(lt_search, "_spent_s", lt_search.DEFAULT_TOTAL_BUDGET_S)
    assert cublaslt.searched() == [HEURISTIC, *FOUND]
    assert len(cublaslt.walks) == 1


def test_the_decoder_setting_names_the_file_unless_the_variable_does(tmp_path, monkeypatch):
    model_folder = str(tmp_path / "model_repository" / "ar_decoder")  # what Triton passes as model_repository
    monkeypatch.delenv("VOXCPM_LT_CACHE")
    model_settings.apply_lt_cache({"lt_cache": ""}, model_folder)
    assert "VOXCPM_LT_CACHE" not in os.environ
    model_settings.apply_lt_cache({"lt_cache": "../build/out/lt_cache.json"}, model_folder)
    assert os.environ["VOXCPM_LT_CACHE"] == str(tmp_path / "build" / "out" / "lt_cache.json")
    model_settings.apply_lt_cache({"lt_cache": "/elsewhere.json"}, model_folder)
    assert os.environ["VOXCPM_LT_CACHE"] == str(tmp_path / "build" / "out" / "lt_cache.json")
